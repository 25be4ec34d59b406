"""The small HTML pages of the account and OAuth flows (templates in app/templates/account/): forms that
work without JavaScript, labels on every field, every value escaped, never framed nor cached."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from app.kit.templates import html_page
from app.models import User

# The device page (device_page.py), the `verification_uri` POST /v1/auth/device-sessions answers.
DEVICE_PATH = "/account/device"

# Never framed (clickjacking on the consent page) and never cached (tokens are shown once).
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    # No form-action: browsers apply it to the redirect that follows the consent form, which goes
    # to the client's own site.
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "Referrer-Policy": "same-origin",
}


def page(template: str, *, status: int = 200, user: User | None = None, **context: Any) -> HTMLResponse:
    """An account page (app/templates/account/): `user` is named above the content as signed in."""
    if user is not None:
        context["signed_in_as"] = user_label(user)
    return html_page(template, status=status, headers=PAGE_HEADERS, **context)


def redirect(location: str, status: int = 303) -> RedirectResponse:
    return RedirectResponse(location, status_code=status, headers={"Cache-Control": "no-store"})


def with_cookies(target: Response, source: Response) -> Response:
    """Copy the Set-Cookie headers a dependency put on the injected response (a refreshed or cleared
    session cookie): FastAPI adds them to returned values only, not to a Response the route built."""
    for name, value in source.raw_headers:
        if name == b"set-cookie":
            target.raw_headers.append((name, value))
    return target


def local_path(candidate: str | None, default: str = "/account/tokens") -> str:
    """`candidate` if it is a path on this service, else `default`: never an open redirect."""
    if (
        not candidate
        or not candidate.startswith("/")
        or candidate.startswith(("//", "/\\"))
        or any(ord(c) < 0x20 or c == "\x7f" for c in candidate)
    ):
        return default
    return candidate


def this_path(request: Request) -> str:
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def sign_in_url(next_path: str) -> str:
    return "/account/sign-in?" + urlencode({"next": next_path})


def user_label(user: User) -> str:
    return user.display_username or user.username or user.email


def sign_in_form(
    next_path: str, *, client_name: str = "", error: str = "", username: str = "", status: int = 200
) -> HTMLResponse:
    """The sign-in form, going on to `next_path`; `client_name` when an OAuth client sent the person."""
    return page(
        "account/sign_in.html",
        status=status,
        next_path=next_path,
        client_name=client_name,
        error=error,
        username=username,
    )
