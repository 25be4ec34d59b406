"""The console's Suppressions: the addresses never sent to again with why each is there (a hard bounce,
a spam complaint, added by the API or here), searched by part of the address; add some, remove one.
The email API's suppression service and its SuppressionCreate rules."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Depends, Response

from app.console.pages import CONSOLE, ConsoleUser, PostedForm, messages_of
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError
from app.kit.pagination import parse_page
from app.mail import suppression_service
from app.mail.common import page_of
from app.mail.input import RawInput, normalize, validate
from app.mail.specs import SuppressionCreate

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])
SUPPRESSIONS = CONSOLE + "/suppressions"
REASONS = {
    "bounce": "a hard bounce",
    "complaint": "a spam complaint",
    "api": "added through the API",
    "console": "added in the console",
}


def _page(me: ConsoleUser, q: str = "", page: str = "1", *, status: int = 200, **context: Any) -> Response:
    context.setdefault("errors", [])
    context.setdefault("done", "")
    context.setdefault("typed", "")
    search = q.strip()[:191]
    paging = parse_page(page, suppression_service.SUPPRESSIONS_PER_PAGE)
    rows, total = page_of(me.db, suppression_service.suppressions_query(me.account_id, search), paging)
    return me.page(
        "suppressions.html",
        section="suppressions",
        status=status,
        rows=rows,
        total=total,
        search=search,
        page=paging.page,
        last_page=max(1, -(-total // paging.per_page)),
        reasons=REASONS,
        **context,
    )


@router.get(SUPPRESSIONS)
def suppressions_page(me: ConsoleUser, q: str = "", page: str = "1", done: str = "") -> Response:
    return _page(me, q, page, done=done)


@router.post(SUPPRESSIONS)
def add_submit(me: ConsoleUser, form: PostedForm) -> Response:
    # One address a line (or separated by commas or spaces), as a pasted column arrives.
    typed = form.get("emails")
    addresses = [part for part in re.split(r"[\s,;]+", typed) if part]
    try:
        body = validate(SuppressionCreate, RawInput(normalize({"emails": addresses})), status=422)
        added, listed = suppression_service.add_suppressions(me.db, me.principal, body, reason="console")
    except DomainError as refused:
        return _page(me, status=refused.status, errors=messages_of(refused), typed=typed)
    return me.redirect(f"{SUPPRESSIONS}?done=added+{added}%2C+already+listed+{listed}")


@router.post(SUPPRESSIONS + "/remove")
def remove_submit(me: ConsoleUser, form: PostedForm) -> Response:
    try:
        suppression_service.remove_suppression(me.db, me.principal, form.get("email"))
    except DomainError as refused:
        return _page(me, status=refused.status, errors=messages_of(refused))
    return me.redirect(f"{SUPPRESSIONS}?done=removed")
