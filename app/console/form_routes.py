"""The console's Forms: the account's hosted sign-up forms with their lists, public URL and an HTML
snippet to paste into a site; a new form. The same form service as `tidings forms create`. Sign-ups
waiting for their confirmation are not listed: nothing is stored before a visitor confirms (the form's
POST only reads; see app/mail/hosted_forms/hosted_form_service.py), so there is nothing to list."""

from __future__ import annotations

from html import escape
from typing import Any

from fastapi import APIRouter, Depends, Response

from app.app_state import SettingsDep
from app.console.pages import CONSOLE, ConsoleUser, PostedForm, messages_of
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError
from app.mail import form_service, list_service
from app.mail.hosted_forms.hosted_form_service import HONEYPOT

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])
FORMS = CONSOLE + "/forms"


def embed_snippet(public_url: str, title: str) -> str:
    """The HTML a site pastes to sign people up: it posts to the hosted form, whose answer (check your
    inbox, or the form again with its messages) the visitor then sees. The honeypot field stays empty
    for people and is hidden from them, as on the hosted page."""
    return (
        f'<form method="post" action="{escape(public_url)}" aria-label="{escape(title)}">\n'
        '  <label for="tidings-email">Email</label>\n'
        '  <input id="tidings-email" name="email" type="email" autocomplete="email"\n'
        '    maxlength="191" required>\n'
        '  <label for="tidings-first-name">First name</label>\n'
        '  <input id="tidings-first-name" name="first_name" type="text" autocomplete="given-name"\n'
        '    maxlength="191">\n'
        f'  <div style="position:absolute;left:-5000px" aria-hidden="true"><input name="{HONEYPOT}" '
        'type="text" tabindex="-1" autocomplete="off"></div>\n'
        '  <button type="submit">Subscribe</button>\n'
        "</form>"
    )


def _forms_page(me: ConsoleUser, settings: SettingsDep, *, status: int = 200, **context: Any) -> Response:
    context.setdefault("errors", [])
    context.setdefault("values", {"title": "", "lists": []})
    base = settings.base_url.rstrip("/")
    lists = list_service.account_lists(me.db, me.account_id)
    names = {item.id: item.name for item in lists}
    forms = []
    for form, list_ids in form_service.account_forms(me.db, me.account_id):
        public_url = f"{base}/f/{form.id}"
        forms.append(
            {
                "id": form.id,
                "title": form.title,
                "created_at": form.created_at,
                "lists": [names[i] for i in list_ids if i in names],
                "url": public_url,
                "snippet": embed_snippet(public_url, form.title),
            }
        )
    return me.page("forms.html", section="forms", status=status, forms=forms, lists=lists, **context)


@router.get(FORMS)
def forms_page(me: ConsoleUser, settings: SettingsDep) -> Response:
    return _forms_page(me, settings)


@router.post(FORMS)
def create_form_submit(me: ConsoleUser, settings: SettingsDep, form: PostedForm) -> Response:
    list_ids = [int(v) for v in form.all("lists") if v.isdigit() and len(v) < 19]
    try:
        form_service.create_form(me.db, me.account_id, form.get("title"), list_ids)
    except DomainError as refused:
        values = {"title": form.text("title"), "lists": list_ids}
        return _forms_page(me, settings, status=refused.status, errors=messages_of(refused), values=values)
    return me.redirect(FORMS)
