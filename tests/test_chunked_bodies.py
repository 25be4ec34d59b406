"""Every route that takes a body reads it through one capped reader (app/kit/body.py): a body sent in
chunks, with no Content-Length to refuse it by, is refused as soon as it passes the route's cap, and
the server's memory does not grow with it.

A real `tidings serve` is sent up to 64 MiB of chunked body on each body-taking route (every POST, PUT
and PATCH route of the app: the email API, /v1, /api/auth, OAuth, the hosted forms, the account pages
and the provider webhooks), signed in and authenticated so the body is what the route reads next. The
client stops sending at the first byte of the answer, so each request costs about its route's cap (8
MiB at most) rather than 64 MiB; a server that held the whole body would grow by 64 MiB or more. The
peak resident set of the server process is reset before each request and must grow by under 16 MiB.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute
from sqlalchemy import Engine, delete
from sqlalchemy.orm import Session

from app.authroutes import account_pages, api_auth, device_page, oauth, v1_auth
from app.db import make_write_session_factory
from app.feeds.router import feed_routers
from app.identity.accounts import create_user
from app.identity.tokens import create_personal_token
from app.mail.form_service import create_form
from app.mail.list_service import make_list
from app.mail.router import mail_routers
from app.models import Account
from app.watches.router import watch_routers
from tests.chunked import peak, peak_reset, stream_chunked
from tests.mail.bounces.providers.samples import SendGridSigner
from tests.processes import Running, shipped_serve

BOUNCE_SECRET = "bounce-secret"
POSTMARK_SECRET = "postmark-secret"
# Routes that end the session or revoke the token (/account/tokens/1/revoke is the test's own): last.
ENDING_THE_SESSION = ("sign-out", "logout", "revoke")
# One route of each reader, which must answer that the body is too large (the other routes may answer
# before reading it: a closed sign-up, a route that takes no body, an id that names nothing).
SAID_TOO_LARGE = {
    "POST /contacts",
    "POST /f/{form}",
    "POST /webhooks/bounces",
    "POST /webhooks/bounces/mailgun",
    "POST /v1/feeds",
    "POST /v1/auth/device-sessions/token",
    "POST /api/auth/sign-in/username",
    "POST /oauth/authorize",
    "POST /account/sign-in",
}
BODY_BYTES = 64 * 1024 * 1024
MAX_GROWTH = 16 * 1024 * 1024
PASSWORD = "chunked-bodies-password-1"
ULID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
APP_ROOT = Path(__file__).resolve().parent.parent / "app"


@dataclass(frozen=True)
class Owner:
    token: str
    form_id: int


@pytest.fixture
def owner(engine: Engine) -> Iterator[Owner]:
    """A committed user with a password (for the session cookie), a token and a hosted form."""
    with make_write_session_factory(engine)() as session:
        user = create_user(
            session, email="chunked@example.com", name="Chunked", username="chunked", password=PASSWORD
        )
        _, token = create_personal_token(session, user)
        account_id = user.account_id
        made = make_list(session, account_id, user.id, "Chunked")
        form = create_form(session, account_id, "Chunked", [made.id])
        session.commit()
        owner = Owner(token, form.id)
    try:
        yield owner
    finally:
        with Session(engine) as session:
            session.execute(delete(Account).where(Account.id == account_id))
            session.commit()


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[Running]:
    with shipped_serve(
        database_url,
        tmp_path / "var",
        "--no-scheduler",
        TIDINGS_BOUNCE_WEBHOOK_SECRET=BOUNCE_SECRET,
        TIDINGS_POSTMARK_WEBHOOK_SECRET=POSTMARK_SECRET,
        TIDINGS_SENDGRID_WEBHOOK_PUBLIC_KEY=SendGridSigner.make().public_key,
        TIDINGS_MAILGUN_WEBHOOK_SIGNING_KEY="mailgun-key",
        TIDINGS_SES_TOPIC_ARNS="*",
    ) as served:
        yield served


ROUTERS = [
    *mail_routers,
    v1_auth.router,
    *feed_routers,
    api_auth.router,
    oauth.router,
    account_pages.router,
    device_page.router,
    *watch_routers,
]


def body_routes(form_id: int) -> list[tuple[str, str]]:
    """(method, path) of every route of the app (app/main.py's routers) that may take a body, path
    parameters filled in; the routes that end the session last, so the others find it."""
    found = []
    for route in (route for router in ROUTERS for route in router.routes):
        if not isinstance(route, APIRoute):
            continue
        for method in sorted(route.methods & {"POST", "PUT", "PATCH"}):
            path = route.path.replace("/f/{id}", f"/f/{form_id}")
            path = re.sub(r"\{[^}]*id\}", "1", path)
            found.append((method, re.sub(r"\{[^}]*\}", ULID, path)))
    return sorted(found, key=lambda route: any(word in route[1] for word in ENDING_THE_SESSION))


def credentials(path: str, token: str, cookie: str) -> dict[str, str]:
    """What lets each route go on to read its body: the caller's token and session cookie, and the
    provider routes' own secrets."""
    headers = {"Authorization": f"Bearer {token}", "Cookie": cookie, "Content-Type": "application/json"}
    if path == "/webhooks/bounces":
        headers["Authorization"] = f"Bearer {BOUNCE_SECRET}"
    if path == "/webhooks/bounces/postmark":
        headers["X-Tidings-Token"] = POSTMARK_SECRET
    if path.startswith(("/oauth/", "/account/")):
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    return headers


def test_chunked_bodies_are_refused_at_the_cap_without_the_server_holding_them(
    server: Running, owner: Owner
) -> None:
    with httpx.Client(base_url=server.base, timeout=30) as http:
        signed_in = http.post(
            "/api/auth/sign-in/username",
            json={"username": "chunked", "password": PASSWORD},
            headers={"Origin": server.base},
        )
        assert signed_in.status_code == 200, signed_in.text
        cookie = "; ".join(f"{name}={value}" for name, value in http.cookies.items())
    pid = server.process.pid
    grew, unanswered, too_large = {}, [], set()
    for method, path in body_routes(owner.form_id):
        headers = {**credentials(path, owner.token, cookie), "Origin": server.base}
        before = peak_reset(pid)
        streamed = stream_chunked(server.base, method, path, headers, BODY_BYTES)
        growth = peak(pid) - before
        if growth >= MAX_GROWTH:
            grew[f"{method} {path}"] = growth // 1024 // 1024
        if streamed.status is None or streamed.status >= 500:
            unanswered.append(f"{method} {path}: {streamed.head[:200]!r}")
        if b"larger than" in streamed.head or b"too large" in streamed.head:
            too_large.add(f"{method} {path}".replace(f"/f/{owner.form_id}", "/f/{form}"))
    assert grew == {}, f"MiB the server grew by: {grew}"
    assert unanswered == []
    assert too_large >= SAID_TOO_LARGE, SAID_TOO_LARGE - too_large
    assert "Traceback" not in server.output()


def test_only_the_capped_reader_reads_a_body() -> None:
    """Starlette's own readers hold the whole body first: only app/kit/body.py streams it, and a form
    is parsed only from what the capped reader kept."""
    readers = re.compile(r"request\.(body|stream|json)\(\)")
    offenders = [
        str(path.relative_to(APP_ROOT))
        for path in APP_ROOT.rglob("*.py")
        if path.name != "body.py" and readers.search(path.read_text())
    ]
    assert offenders == []
