"""The hosted forms' pages (templates in app/templates/forms/)."""

from __future__ import annotations

from typing import Any

from fastapi.responses import HTMLResponse

from app.config import Settings
from app.kit.templates import html_page
from app.mail.hosted_forms.hosted_form_service import HONEYPOT, PublicForm
from app.mail.sending.tokens import CONFIRM_MAX_AGE_SECONDS

# No scripts, no outside resources; the form posts only to this service. frame-ancestors is left
# open: owners may show their form in an iframe on their own site.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
    "base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    # The confirmation token is in the URL: it must not leave in a Referer.
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def page(
    template: str, status: int = 200, headers: dict[str, str] | None = None, **context: Any
) -> HTMLResponse:
    """A page of app/templates/forms/ with this module's headers."""
    return html_page(template, status=status, headers={**PAGE_HEADERS, **(headers or {})}, **context)


def form_url(settings: Settings, form_id: int) -> str:
    return f"{settings.base_url.rstrip('/')}/f/{form_id}"


# name, label, input type, autocomplete
FIELD_INPUTS = (
    ("email", "Email address", "email", "email"),
    ("first_name", "First name (optional)", "text", "given-name"),
    ("last_name", "Last name (optional)", "text", "family-name"),
)


def form_page(
    form: PublicForm,
    values: dict[str, Any] | None = None,
    errors: dict[str, list[str]] | None = None,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    # Only text is shown again: a JSON body may have sent anything in a field.
    shown = {name: value for name, value in (values or {}).items() if isinstance(value, str)}
    return page(
        "forms/form.html",
        status,
        headers,
        form=form,
        values=shown,
        errors=errors or {},
        fields=FIELD_INPUTS,
        honeypot=HONEYPOT,
    )


def message_page(
    heading: str, paragraphs: list[str], status: int = 200, headers: dict[str, str] | None = None
) -> HTMLResponse:
    """A page of a heading and paragraphs of plain text."""
    return page("forms/message.html", status, headers, heading=heading, paragraphs=paragraphs)


def not_found_page() -> HTMLResponse:
    return message_page(
        "Form not found", ["This sign-up form does not exist or is no longer available."], 404
    )


def invalid_link_page() -> HTMLResponse:
    days = CONFIRM_MAX_AGE_SECONDS // 86400
    return message_page(
        "Link invalid or expired",
        [
            "This confirmation link is invalid or has expired.",
            f"Links work for {days} days. To subscribe, please fill in the sign-up form again.",
        ],
        404,
    )
