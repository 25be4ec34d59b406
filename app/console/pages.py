"""The console's shell: who is signed in (the account session cookie of /account/sign-in), the
navigation, the pages' headers, the form reader and the assets. Each section is a `*_routes.py` module
beside this one that calls the same services as the API routes; see docs/console.md."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import Depends, Request, Response
from sqlalchemy.orm import Session

from app.authroutes.pages import redirect, sign_in_url, this_path, user_label, with_cookies
from app.feeds.item_service import item_data
from app.feeds.wire import FeedItemWire
from app.identity.dependencies import OptionalSessionUser
from app.identity.principal import Principal, principal_of
from app.kit.body import BodyTooLarge, read_capped
from app.kit.errors import DomainError
from app.kit.templates import html_page
from app.kit.time import iso
from app.models import Account, User
from app.request_sessions import SessionDep

CONSOLE = "/console"
ASSETS = CONSOLE + "/assets"


@dataclass(frozen=True)
class Section:
    key: str
    label: str
    path: str


# Every section the console has, in the navigation's order. Only pages that exist are listed: part one
# of the console (contacts, campaigns, ...) adds its sections here.
SECTIONS = (
    Section("home", "Home", CONSOLE + "/home"),
    Section("campaigns", "Campaigns", CONSOLE + "/campaigns"),
    Section("contacts", "Contacts", CONSOLE + "/contacts"),
    Section("lists", "Lists", CONSOLE + "/lists"),
    Section("fields", "Fields", CONSOLE + "/fields"),
    Section("suppressions", "Suppressions", CONSOLE + "/suppressions"),
    Section("forms", "Forms", CONSOLE + "/forms"),
    Section("automations", "Automations", CONSOLE + "/automations"),
    Section("feeds", "Feeds", CONSOLE + "/feeds"),
    Section("watches", "Watches", CONSOLE + "/watches"),
    Section("newsletter", "Newsletter from a feed", CONSOLE + "/newsletter"),
    Section("engines", "Engines", CONSOLE + "/engines"),
    Section("webhooks", "Webhooks", CONSOLE + "/webhooks"),
    Section("tokens", "Tokens", "/account/tokens"),
    Section("deliverability", "Deliverability", CONSOLE + "/deliverability"),
    Section("account", "Account", CONSOLE + "/account"),
)

# Never framed nor cached (secrets are shown once); scripts and styles only from this service.
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "same-origin",
}

# The console's own scripts and styles (app/templates/console/), served by Tidings: no CDN, no bundler.
ASSET_TYPES = {"console.js": "text/javascript; charset=utf-8", "console.css": "text/css; charset=utf-8"}


@cache
def asset(name: str) -> tuple[bytes, str]:
    """An asset's bytes and a short hash of them, which its URL carries so it can be cached for a year."""
    data = (files("app") / "templates" / "console" / name).read_bytes()
    return data, hashlib.sha256(data).hexdigest()[:12]


def asset_url(name: str) -> str:
    return f"{ASSETS}/{name}?v={asset(name)[1]}"


class SignInRequired(Exception):
    """Raised by the console's dependency without a session: answered by a redirect to sign-in."""

    def __init__(self, next_path: str, response: Response) -> None:
        super().__init__(next_path)
        self.next_path = next_path
        self.response = response


def sign_in_redirect(_request: Request, exc: Exception) -> Response:
    if not isinstance(exc, SignInRequired):  # pragma: no cover - registered for this class only
        raise exc
    return with_cookies(redirect(sign_in_url(exc.next_path)), exc.response)


@dataclass
class Console:
    """The signed-in person on a console page: the principal the services take, and the page makers,
    which carry the session cookie the dependency may have refreshed."""

    principal: Principal
    user: User
    account: Account
    db: Session
    response: Response

    @property
    def account_id(self) -> int:
        return self.principal.account.id

    def page(self, template: str, *, section: str, status: int = 200, **context: Any) -> Response:
        page = html_page(
            f"console/{template}",
            status=status,
            headers=PAGE_HEADERS,
            sections=SECTIONS,
            current=section,
            signed_in_as=user_label(self.user),
            script_url=asset_url("console.js"),
            style_url=asset_url("console.css"),
            **context,
        )
        return with_cookies(page, self.response)

    def redirect(self, location: str) -> Response:
        return with_cookies(redirect(location), self.response)


def current_console(
    request: Request, response: Response, signed_in: OptionalSessionUser, db: SessionDep
) -> Console:
    if signed_in is None:
        raise SignInRequired(this_path(request), response)
    account = db.get(Account, signed_in.user.account_id)
    if account is None:
        raise SignInRequired(this_path(request), response)
    return Console(principal_of(signed_in.user, account), signed_in.user, account, db, response)


ConsoleUser = Annotated[Console, Depends(current_console)]


# A console form carries at most a newsletter's template (200,000 characters, escaped in transit) and
# its other fields: the body is refused past this while it is read.
MAX_FORM_BYTES = 1024 * 1024
MAX_FORM_FIELDS = 200


class Form:
    """A posted form's fields (application/x-www-form-urlencoded, what the console's forms send)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.pairs = pairs

    def get(self, name: str, default: str = "") -> str:
        return next((value for key, value in self.pairs if key == name), default)

    def text(self, name: str) -> str:
        return self.get(name).strip()

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.pairs if key == name]


async def read_form(request: Request) -> Form:
    """The form, read with a cap: 413 past MAX_FORM_BYTES, 415 for another content type, 400 when it
    cannot be read (not UTF-8, too many fields); NUL characters are dropped, as the pages drop them."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        raise DomainError(415, "A console form is sent as application/x-www-form-urlencoded.")
    try:
        body = await read_capped(request, MAX_FORM_BYTES)
    except BodyTooLarge as exc:
        raise DomainError(413, f"The form is larger than {MAX_FORM_BYTES} bytes.") from exc
    try:
        pairs = parse_qsl(
            body.decode("utf-8"),
            keep_blank_values=True,
            strict_parsing=False,
            errors="strict",
            max_num_fields=MAX_FORM_FIELDS,
        )
    except (UnicodeDecodeError, ValueError) as exc:
        raise DomainError(400, "The form could not be read.") from exc
    return Form([(key, value.replace("\x00", "")) for key, value in pairs])


PostedForm = Annotated[Form, Depends(read_form)]


def messages_of(error: DomainError) -> list[str]:
    """A service's refusal as the lines a page shows: each field's messages, or the error's own."""
    if error.errors:
        return [f"{field}: {message}" for field, items in error.errors.items() for message in items]
    return [error.message]


def item_view(item: FeedItemWire) -> dict[str, str]:
    """A feed item as a console row: its title, and its link only when it is an http(s) URL (an item's
    data is what an outside feed wrote)."""
    data = item_data(item) or {}
    url = data.get("url") if isinstance(data, dict) else None
    title = data.get("title") if isinstance(data, dict) else None
    link = url if isinstance(url, str) and url.lower().startswith(("http://", "https://")) else ""
    return {
        "title": title if isinstance(title, str) and title else link or item.external_id,
        "link": link,
        "source": item.source_label or item.source_kind,
        "when": iso(item.occurred_at) or "unknown",
    }


def error_page(error: DomainError) -> Response:
    """A refusal on a console page (another account's feed, a plan without API access) as a page."""
    return html_page(
        "console/error.html", status=error.status, headers=PAGE_HEADERS, message=messages_of(error)
    )
