"""Hosted sign-up forms' routes: `GET|POST /f/{id}` and `GET /f/confirm/{token}` (the rules are in
hosted_form_service.py)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse
from starlette.background import BackgroundTask

from app.app_state import SettingsDep, app_state
from app.identity.token_lookup import forget_accounts
from app.kit.body import BodyTooLarge, read_capped
from app.kit.client import client_address
from app.kit.errors import DomainError
from app.kit.json_types import JsonObject
from app.mail.contact_service import ContactLimitExceeded
from app.mail.hosted_forms.hosted_form_pages import (
    form_page,
    form_url,
    invalid_link_page,
    message_page,
    not_found_page,
    page,
)
from app.mail.hosted_forms.hosted_form_service import (
    MAX_BODY_BYTES,
    MAX_FIELDS,
    TOKEN,
    Confirmed,
    confirm_signup,
    ip_or_none,
    log,
    open_form,
    parse_form_id,
    request_signup,
)
from app.mail.sending.tokens import MailTokens
from app.request_sessions import ReadSessionDep, SessionDep, WriteSessionDep

# Pages for people, not API operations: kept out of the email API's OpenAPI document.
router = APIRouter(include_in_schema=False)


class BodyProblem(DomainError):
    pass


async def read_submission(request: Request) -> JsonObject:
    """The submitted fields (as sent: strings, or any JSON value), or BodyProblem (413, 415, 422)."""
    try:
        body = await read_capped(request, MAX_BODY_BYTES)
    except BodyTooLarge as exc:
        raise BodyProblem(413, "The submitted form is too large.") from exc
    if not body.strip():
        return {}  # nothing sent: the email field is required (422), whatever the content type
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    unreadable = BodyProblem(422, "The submitted form could not be read.")
    if content_type == "application/x-www-form-urlencoded":
        try:
            pairs = parse_qsl(
                body.decode("utf-8"),
                keep_blank_values=True,
                encoding="utf-8",
                errors="strict",
                max_num_fields=MAX_FIELDS,
            )
        except ValueError as exc:  # UnicodeDecodeError, or too many fields
            raise unreadable from exc
        fields: dict[str, Any] = {}
        for key, value in pairs:
            fields.setdefault(key, value)  # a repeated name counts once, as browsers send it once
        return fields
    if content_type == "application/json" or content_type.endswith("+json"):
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise unreadable from exc
        if not isinstance(parsed, dict):
            raise unreadable
        return parsed
    raise BodyProblem(415, "Send the form as application/x-www-form-urlencoded or as JSON.")


@router.get("/f/{id}", response_class=HTMLResponse)
def show_form(id: str, session: SessionDep) -> HTMLResponse:
    form_id = parse_form_id(id)
    form = open_form(session, form_id) if form_id is not None else None
    if form is None:
        return not_found_page()
    return form_page(form)


@router.post("/f/{id}", response_class=HTMLResponse)
async def submit_form(
    id: str, request: Request, session: ReadSessionDep, settings: SettingsDep
) -> HTMLResponse:
    form_id = parse_form_id(id)
    # A reader's session: a POST's would be a writer's (BEGIN IMMEDIATE on SQLite), and this only reads
    # before it sends the confirmation email.
    form = await run_in_threadpool(open_form, session, form_id) if form_id else None
    if form is None:
        return not_found_page()
    state = app_state(request)
    # Keys made or deleted since the last sign-up (one small query).
    await run_in_threadpool(state.dkim_signer.refresh, session)
    raw: dict[str, Any] = {}
    try:
        raw = await read_submission(request)
        signup = await request_signup(
            settings, state.form_limits, form, raw, client_address(request), state.dkim_signer
        )
    except DomainError as refused:
        return form_page(
            form, raw, refused.errors or {"form": [refused.message]}, refused.status, refused.headers
        )
    return page("forms/check_inbox.html", email=signup.email, form_title=form.title)


@router.get("/f/confirm/{token}", response_class=HTMLResponse)
def confirm(token: str, request: Request, session: WriteSessionDep, settings: SettingsDep) -> HTMLResponse:
    found = (
        MailTokens(settings.resolved_secret_key).read_confirm_issued(token)
        if TOKEN.fullmatch(token)
        else None
    )
    if found is None:
        return invalid_link_page()
    signup, issued_at = found
    # Opened from an email, so it is a GET that writes: its session is a writer's (WriteSessionDep), not
    # the read-only one (autocommit on PostgreSQL) a GET gets from SessionDep.
    try:
        confirmation = confirm_signup(session, signup, issued_at, ip_or_none(client_address(request)))
    except ContactLimitExceeded:
        # Refused before anything was written: the request's transaction ends with nothing to commit.
        log.warning(
            "form %s: the account is at its contact limit; a confirmed sign-up was refused", signup.form_id
        )
        return message_page(
            "Sign-up not possible right now",
            ["This list cannot take new subscribers at the moment. Please try again later."],
            402,
        )
    form = confirmation.form
    if confirmation.outcome is Confirmed.GONE or form is None:
        return not_found_page()
    if confirmation.outcome is Confirmed.STALE:
        return page("forms/stale.html", 410, form_url=form_url(settings, form.id))
    done = page("forms/subscribed.html", email=signup.email, form_title=form.title)
    if confirmation.outcome is Confirmed.SUBSCRIBED:
        # As after the API's own writes: the owner's next read (GET /me) must not show a remembered
        # count. Forgotten now, and again once the subscription is committed (as the token pages do).
        lookup = app_state(request).token_lookup
        lookup.forget_account(form.account_id)
        done.background = BackgroundTask(forget_accounts, lookup, [form.account_id])
    return done
