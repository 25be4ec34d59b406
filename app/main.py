"""create_app(): settings, database, rate limiter, routers and the error handlers of each interface."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from app.app_state import AppState
from app.authroutes import account_pages, api_auth, device_page, oauth, v1_auth
from app.config import Settings
from app.console.pages import CONSOLE, error_page
from app.console.router import install_console
from app.db import (
    RETRY_AFTER_SECONDS,
    UNREACHABLE,
    create_db_engine,
    is_sqlite_url,
    make_async_pool,
    make_session_factory,
    make_write_session_factory,
    note_unreachable,
)
from app.docs_routes import install_docs_routes, install_openapi_routes
from app.feeds.router import feed_routers
from app.health import health_router
from app.identity.dependencies import rate_headers
from app.identity.sign_in import SignInThrottle
from app.identity.token_lookup import CachedTokenLookup, PostgresTokenLookup, SessionTokenLookup, TokenLookup
from app.kit.errors import DomainError
from app.kit.heap import freeze_start_up_objects
from app.kit.pagination import PageAnchors
from app.kit.ratelimit import RateLimiter
from app.logs import RequestIds
from app.mail.bounces.providers.ses import SnsClient
from app.mail.campaigns.campaign_check import SigningPolicy
from app.mail.campaigns.campaign_preview_service import TEST_SENDS_PER_HOUR
from app.mail.dns_records import system_txt_resolver
from app.mail.hosted_forms.hosted_form_service import FormLimits
from app.mail.newsletter_service import MailNewsletters
from app.mail.router import mail_routers
from app.mail.sending.dkim import DkimSigner
from app.metrics import RequestMetrics, metrics_router
from app.scheduler import Scheduler
from app.watches.router import watch_routers

log = logging.getLogger("tidings")


def error_body(request: Request, error: DomainError) -> dict[str, Any]:
    """One shape per interface: `{error, detail}` under /v1, `{code, message}` under /api/auth,
    `{message, errors}` for the email API."""
    path = request.url.path
    if path.startswith("/v1/") or path == "/v1":
        detail: Any = error.errors if error.errors else error.message
        return {"error": error.code or "error", "detail": detail, **error.extra}
    if path.startswith("/api/auth"):
        return {"code": (error.code or "ERROR").upper(), "message": error.message, **error.extra}
    body: dict[str, Any] = {"message": error.message}
    if error.errors:
        body["errors"] = error.errors
    body.update(error.extra)
    return body


def install_error_handlers(app: FastAPI) -> None:
    # Starlette calls each handler only for the exception class it is registered for: the casts below
    # only tell the type checker so.
    async def on_domain_error(request: Request, exc: Exception) -> Response:
        domain = cast(DomainError, exc)
        if request.url.path.startswith(CONSOLE + "/"):
            return error_page(domain)
        headers = {**rate_headers(request), **domain.headers}
        return JSONResponse(error_body(request, domain), status_code=domain.status, headers=headers)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        http = cast(StarletteHTTPException, exc)
        messages = {404: "Not Found.", 405: "Method Not Allowed."}
        message = messages.get(http.status_code, str(http.detail))
        codes = {404: "not_found", 405: "method_not_allowed"}
        error = DomainError(http.status_code, message, code=codes.get(http.status_code))
        if request.url.path.startswith(CONSOLE + "/"):
            return error_page(error)
        return JSONResponse(error_body(request, error), status_code=http.status_code, headers=http.headers)

    async def on_request_validation(request: Request, exc: Exception) -> Response:
        # Only path parameters are declared to FastAPI; a non-integer id names no resource.
        error = DomainError(404, "Not Found.", code="not_found")
        if request.url.path.startswith(CONSOLE + "/"):
            return error_page(error)
        return JSONResponse(error_body(request, error), status_code=404, headers=rate_headers(request))

    async def on_client_gone(request: Request, exc: Exception) -> Response:
        # The client hung up while its body was read: nobody is left to answer, and nothing was done.
        # Not an error of ours, so no traceback; 499 (nginx's "client closed request") in the metrics.
        log.info("client disconnected during %s %s", request.method, request.url.path)
        return Response(status_code=499)

    async def on_database_unreachable(request: Request, exc: Exception) -> JSONResponse:
        # Not a bug of this request: the database is gone for now. One line now and then, and a 503
        # in the interface's own shape telling the client when to come back.
        note_unreachable(exc)
        error = DomainError(
            503, "The database is unreachable for now; try again shortly.", code="database_unavailable"
        )
        headers = {**rate_headers(request), "Retry-After": str(RETRY_AFTER_SECONDS)}
        return JSONResponse(error_body(request, error), status_code=503, headers=headers)

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        error = DomainError(500, "Server Error.", code="internal_error")
        return JSONResponse(error_body(request, error), status_code=500)

    app.add_exception_handler(DomainError, on_domain_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(RequestValidationError, on_request_validation)
    app.add_exception_handler(ClientDisconnect, on_client_gone)
    for unreachable in UNREACHABLE:
        app.add_exception_handler(unreachable, on_database_unreachable)
    app.add_exception_handler(Exception, on_unexpected)


@dataclass
class Databases:
    """The app's ways to the database: a read and a write session factory (the same one unless the app
    owns a SQLite or PostgreSQL engine), the token lookup, and on PostgreSQL the async pool."""

    engine: Engine | None
    session_factory: sessionmaker[Session]
    read_session_factory: sessionmaker[Session]
    write_session_factory: sessionmaker[Session]
    token_lookup: TokenLookup
    async_pool: AsyncConnectionPool | None


def open_databases(settings: Settings, session_factory: sessionmaker[Session] | None) -> Databases:
    engine = None
    if session_factory is None:
        engine = create_db_engine(settings.database_url)
        session_factory = make_session_factory(engine)
    read_session_factory = write_session_factory = session_factory
    if engine is not None and is_sqlite_url(settings.database_url):
        write_session_factory = make_write_session_factory(engine)
    token_lookup: TokenLookup = SessionTokenLookup(session_factory)
    async_pool: AsyncConnectionPool | None = None
    if engine is not None and not is_sqlite_url(settings.database_url):
        # Reads need no transaction: autocommit saves the BEGIN and COMMIT round trips of every GET.
        read_session_factory = make_session_factory(engine.execution_options(isolation_level="AUTOCOMMIT"))
        async_pool = make_async_pool(settings.database_url)
        token_lookup = PostgresTokenLookup(async_pool)
    return Databases(
        engine, session_factory, read_session_factory, write_session_factory, token_lookup, async_pool
    )


def make_lifespan(
    databases: Databases, scheduler: Scheduler | None
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start-up and shutdown: the async pool, the scheduler, the engines of the watch actions."""
    engine, async_pool = databases.engine, databases.async_pool

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if async_pool is not None:
            await async_pool.open()
        if scheduler is not None:
            await scheduler.start()
        if engine is not None:
            freeze_start_up_objects()
        try:
            yield
        finally:
            if scheduler is not None:
                await scheduler.stop()
            if async_pool is not None:
                await async_pool.close()
            engines = cast(AppState, _app.state).engines
            if engines is not None:
                await engines.aclose()
            if engine is not None:
                engine.dispose()

    return lifespan


def set_state(app: FastAPI, settings: Settings, databases: Databases) -> None:
    state = AppState()
    state.settings = settings
    state.read_session_factory = databases.read_session_factory
    state.write_session_factory = databases.write_session_factory
    state.reads_autocommit = databases.read_session_factory is not databases.session_factory
    state.token_lookup = CachedTokenLookup(databases.token_lookup)
    state.page_anchors = PageAnchors()
    state.async_pool = databases.async_pool
    state.mail_rate_limiter = RateLimiter(settings.mail_rate_limit, settings.redis_url)
    state.test_send_limiter = RateLimiter(TEST_SENDS_PER_HOUR, settings.redis_url)
    state.public_page_limiter = RateLimiter(settings.public_page_rate_limit, settings.redis_url)
    state.form_limits = FormLimits.from_settings(settings)
    state.sign_in_throttle = SignInThrottle(settings.redis_url)
    state.sns_client = SnsClient(allow_private=settings.outbound_allow_private)
    state.dkim_signer = DkimSigner(settings.resolved_secret_key, settings.dkim_unsigned_headers.split(","))
    state.newsletters = MailNewsletters(SigningPolicy.from_settings(settings))
    state.engines = None
    state.txt_resolver = system_txt_resolver
    app.state = state


def include_routes(app: FastAPI) -> None:
    app.include_router(health_router)
    app.include_router(metrics_router)
    app.add_middleware(RequestMetrics)
    app.add_middleware(RequestIds)
    # Each feature's routes go straight into the app: a router of routers costs a match per level.
    for router in mail_routers:
        app.include_router(router)
    pages = (account_pages.router, device_page.router)
    for router in (v1_auth.router, *feed_routers, api_auth.router, oauth.router, *pages):
        app.include_router(router)
    for router in watch_routers:
        app.include_router(router)
    install_console(app)
    install_openapi_routes(app)
    install_docs_routes(app)


def create_app(
    settings: Settings | None = None, session_factory: sessionmaker[Session] | None = None
) -> FastAPI:
    """The whole service. Tests pass their own session factory (bound to a rolled-back transaction)."""
    settings = settings or Settings()
    problems = settings.production_problems()
    if problems:
        raise RuntimeError("; ".join(problems))
    databases = open_databases(settings, session_factory)
    # Only an app that owns its database runs background jobs; tests drive the workers themselves.
    scheduler = (
        Scheduler(settings, databases.write_session_factory)
        if databases.engine is not None and settings.scheduler
        else None
    )
    app = FastAPI(
        title="Tidings",
        version="1.2.0",
        description="Email campaigns (SendFox-compatible), feeds and watches, and account auth.",
        lifespan=make_lifespan(databases, scheduler),
        # Ours instead (install_docs_routes): FastAPI's load Swagger UI and ReDoc from a public CDN.
        docs_url=None,
        redoc_url=None,
    )
    set_state(app, settings, databases)
    install_error_handlers(app)
    include_routes(app)
    return app
