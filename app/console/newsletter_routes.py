"""The console's Newsletter from a feed: the RSS-to-email recipe on one page. Pick a feed, optionally
describe what to keep (a `semantic_filter`), pick lists, instant or a daily/weekly digest, send or draft,
and the template, previewed with the items the feed holds now. Saving makes the same watch
POST /v1/watches makes, checked by the same rules (the engine, the lists, the plan)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from app.app_state import app_state
from app.console.pages import CONSOLE, ConsoleUser, PostedForm, messages_of
from app.feeds import feed_service
from app.feeds.item_service import item_data, item_page
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError
from app.kit.json_types import JsonObject
from app.kit.time import utcnow
from app.kit.v1_input import Cursor, validate
from app.mail.list_service import account_lists
from app.watches import newsletter_template, watch_service
from app.watches.dependencies import engines_of, rules_of
from app.watches.specs import WatchInput

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])
NEWSLETTER = CONSOLE + "/newsletter"
# The feeds offered (newest first) and the items a preview is made of.
FEEDS_OFFERED = 200
PREVIEW_ITEMS = 20
CADENCES = {"instant": 0, "daily": 86_400, "weekly": 604_800}


def _values(form: PostedForm | None, feed_id: str) -> dict[str, Any]:
    if form is None:
        return {
            "name": "",
            "feed_id": feed_id,
            "instructions": "",
            "threshold": "0.8",
            "list_ids": [],
            "cadence": "daily",
            "mode": "draft",
            "subject": "",
            "template": newsletter_template.DEFAULT_TEMPLATE,
        }
    return {
        "name": form.text("name"),
        "feed_id": form.text("feed_id"),
        "instructions": form.text("instructions"),
        "threshold": form.text("threshold") or "0.8",
        "list_ids": form.all("list_ids"),
        "cadence": form.text("cadence") if form.text("cadence") in CADENCES else "daily",
        "mode": "send" if form.text("mode") == "send" else "draft",
        "subject": form.text("subject"),
        "template": form.get("template"),
    }


def watch_body(values: dict[str, Any]) -> JsonObject:
    """The watch the recipe is, as POST /v1/watches's JSON would carry it."""
    email: dict[str, Any] = {
        "list_ids": values["list_ids"],
        "mode": values["mode"],
        "delivery": "instant" if values["cadence"] == "instant" else "digest",
        "digest_interval_seconds": CADENCES[values["cadence"]],
    }
    if values["subject"]:
        email["subject"] = values["subject"]
    if values["template"].strip():
        email["template"] = values["template"]
    actions: list[dict[str, Any]] = []
    if values["instructions"]:
        config = {"instructions": values["instructions"], "threshold": values["threshold"]}
        actions.append({"kind": "semantic_filter", "config": config})
    actions.append({"kind": "email", "config": email})
    return {"name": values["name"], "feed_ids": [values["feed_id"]], "actions": actions}


def _preview(me: ConsoleUser, values: dict[str, Any]) -> tuple[newsletter_template.Rendered | None, int]:
    """The next email from the feed's items now (before any filter), and how many items it holds."""
    if not values["feed_id"]:
        return None, 0
    items = [
        item_data(item)
        for item in item_page(me.db, me.account_id, values["feed_id"], Cursor(PREVIEW_ITEMS, None)).items
    ]
    if values["cadence"] == "instant":
        items = items[:1]
    if not items:
        return None, 0
    if newsletter_template.template_problems(values["template"]):
        return None, len(items)
    rendered = newsletter_template.render(
        template=values["template"] or None,
        subject=values["subject"] or None,
        watch_name=values["name"] or "Newsletter",
        items=items,
    )
    return rendered, len(items)


def _page(request: Request, me: ConsoleUser, values: dict[str, Any], **context: Any) -> Response:
    engine_problem = engines_of(app_state(request)).setup_problem("")
    return me.page(
        "newsletter.html",
        section="newsletter",
        values=values,
        feeds=feed_service.list_feeds(me.db, me.account_id, Cursor(FEEDS_OFFERED, None)).items,
        lists=account_lists(me.db, me.account_id),
        engine_problem=engine_problem,
        cadences=list(CADENCES),
        **{"errors": [], "preview": None, "preview_count": 0, **context},
    )


@router.get(NEWSLETTER)
def newsletter_page(request: Request, me: ConsoleUser, feed_id: str = "") -> Response:
    return _page(request, me, _values(None, feed_id))


@router.post(NEWSLETTER)
def newsletter_submit(request: Request, me: ConsoleUser, form: PostedForm) -> Response:
    values = _values(form, "")
    if form.text("action") == "preview":
        try:
            preview, count = _preview(me, values)
        except DomainError as refused:
            return _page(request, me, values, errors=messages_of(refused), status=400)
        return _page(request, me, values, preview=preview, preview_count=count)
    try:
        created = watch_service.create_watch(
            me.db,
            me.principal,
            validate(WatchInput, watch_body(values)),
            dry_run=False,
            rules=rules_of(app_state(request), me.db, me.principal),
            now=utcnow(),
        )
    except DomainError as refused:
        return _page(request, me, values, errors=messages_of(refused), status=400)
    return me.redirect(f"{CONSOLE}/watches/{created.id}")
