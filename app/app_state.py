"""What the app holds for its requests, typed: `AppState` (the app's `app.state`, filled by
`app.main.set_state`), `app_state(request)` to read it, and `SettingsDep` for routes that take the settings.

Request code reads the app's state only through these, never as untyped `request.app.state.X`; the
database sessions are `app.db`'s dependencies, not factories read from here by routes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, cast

from fastapi import Depends
from starlette.datastructures import State
from starlette.requests import HTTPConnection

from app.config import Settings

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool
    from sqlalchemy.orm import Session, sessionmaker

    from app.identity.sign_in import SignInThrottle
    from app.identity.token_lookup import CachedTokenLookup
    from app.kit.newsletters import NewsletterDesk
    from app.kit.pagination import PageAnchors
    from app.kit.ratelimit import RateLimiter
    from app.mail.bounces.providers.ses import SnsClient
    from app.mail.dns_records import TxtResolver
    from app.mail.hosted_forms.hosted_form_service import FormLimits
    from app.mail.sending.dkim import DkimSigner
    from app.watches.engines.registry import Engines


class AppState(State):
    """The app's state. A Starlette `State` (attributes stored in its dict), so tests may still replace
    one (`app.state.form_limits = ...`); the annotations give every reader its type. No defaults here:
    a class attribute would shadow the stored value."""

    settings: Settings
    # Sessions of a reader (autocommit on PostgreSQL when `reads_autocommit`) and of a writer (BEGIN
    # IMMEDIATE on SQLite); the same factory when the app does not own its engine (tests).
    read_session_factory: sessionmaker[Session]
    write_session_factory: sessionmaker[Session]
    reads_autocommit: bool
    token_lookup: CachedTokenLookup
    page_anchors: PageAnchors
    # PostgreSQL only: psycopg's async pool for the hot reads on the event loop.
    async_pool: AsyncConnectionPool | None
    mail_rate_limiter: RateLimiter
    # Test sends of campaigns (POST /campaigns/{id}/test), per account.
    test_send_limiter: RateLimiter
    # The public pages of campaigns (web version, archive), per client address.
    public_page_limiter: RateLimiter
    form_limits: FormLimits
    sign_in_throttle: SignInThrottle
    # Amazon SNS's certificates and subscription confirmations (the SES bounce webhook).
    sns_client: SnsClient
    # The DKIM keys, for the emails requests send themselves (hosted forms' confirmations).
    dkim_signer: DkimSigner
    # The email API's side of a watch's `email` action (app/mail/newsletter_service.py), wired here so
    # that the watch routes ask it without importing the email domain.
    newsletters: NewsletterDesk
    # The watch actions' engines, made on first use (app/watches/dependencies.py); closed at shutdown.
    engines: Engines | None
    # TXT lookups for the console's check of a domain's records (app/mail/dns_records.py); tests put a
    # fake one here.
    txt_resolver: TxtResolver


def app_state(connection: HTTPConnection) -> AppState:
    """The state of the app serving this request (set by `create_app`)."""
    return cast(AppState, connection.app.state)


async def get_settings(connection: HTTPConnection) -> Settings:
    # Async: reading an attribute needs no worker thread.
    return app_state(connection).settings


SettingsDep = Annotated[Settings, Depends(get_settings)]
