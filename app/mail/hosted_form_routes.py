"""Hosted sign-up forms' routes: `GET|POST /f/{id}` and `GET /f/confirm/{token}` (the rules are in
hosted_form_service.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from app.config import Settings
from app.db import SessionDep, transaction
from app.kit.errors import DomainError
from app.mail.contact_service import ContactLimitExceeded
from app.mail.hosted_form_pages import (
    form_page,
    form_url,
    invalid_link_page,
    message_page,
    not_found_page,
    page,
)
from app.mail.hosted_form_service import (
    TOKEN,
    Confirmed,
    client_address,
    confirm_signup,
    ip_or_none,
    log,
    open_form,
    parse_form_id,
    read_open_form,
    read_submission,
    request_signup,
)
from app.mail.sending.tokens import MailTokens

# Pages for people, not API operations: kept out of the email API's OpenAPI document.
router = APIRouter(include_in_schema=False)


@router.get("/f/{id}", response_class=HTMLResponse)
def show_form(id: str, session: SessionDep) -> HTMLResponse:
    form_id = parse_form_id(id)
    form = open_form(session, form_id) if form_id is not None else None
    if form is None:
        return not_found_page()
    return form_page(form)


@router.post("/f/{id}", response_class=HTMLResponse)
async def submit_form(id: str, request: Request) -> HTMLResponse:
    form_id = parse_form_id(id)
    state = request.app.state
    # No SessionDep: a POST's session would be a writer's (BEGIN IMMEDIATE on SQLite) and this only reads.
    form = await run_in_threadpool(read_open_form, state.read_session_factory, form_id) if form_id else None
    if form is None:
        return not_found_page()
    raw: dict[str, Any] = {}
    try:
        raw = await read_submission(request)
        signup = await request_signup(state.settings, state.form_limits, form, raw, client_address(request))
    except DomainError as refused:
        return form_page(
            form, raw, refused.errors or {"form": [refused.message]}, refused.status, refused.headers
        )
    return page("forms/check_inbox.html", email=signup.email, form_title=form.title)


@router.get("/f/confirm/{token}", response_class=HTMLResponse)
def confirm(token: str, request: Request) -> HTMLResponse:
    settings: Settings = request.app.state.settings
    found = (
        MailTokens(settings.resolved_secret_key).read_confirm_issued(token)
        if TOKEN.fullmatch(token)
        else None
    )
    if found is None:
        return invalid_link_page()
    signup, issued_at = found
    # Opened from an email, so it is a GET that writes: its transaction is a writer's, not the read-only
    # (autocommit on PostgreSQL) session a GET gets from SessionDep.
    try:
        with transaction(request.app.state.write_session_factory) as session:
            confirmation = confirm_signup(session, signup, issued_at, ip_or_none(client_address(request)))
    except ContactLimitExceeded:
        log.warning(
            "form %s: the account is at its contact limit; a confirmed sign-up was refused", signup.form_id
        )
        return message_page(
            "Sign-up not possible right now",
            ["This list cannot take new subscribers at the moment. Please try again later."],
            402,
        )
    form = confirmation.form
    if confirmation.outcome is Confirmed.SUBSCRIBED and form is not None:
        # As after the API's own writes: the owner's next read (GET /me) must not show a remembered count.
        request.app.state.token_lookup.forget_account(form.account_id)
    if confirmation.outcome is Confirmed.GONE or form is None:
        return not_found_page()
    if confirmation.outcome is Confirmed.STALE:
        return page("forms/stale.html", 410, form_url=form_url(settings, form.id))
    return page("forms/subscribed.html", email=signup.email, form_title=form.title)
