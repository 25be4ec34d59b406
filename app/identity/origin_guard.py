"""better-auth's CSRF guard: a POST that carries cookies must come from a page of the service itself,
as its `Origin` (or, lacking one, its `Referer`) shows. The only trusted origin is TIDINGS_BASE_URL's."""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import Request

from app.app_state import app_state
from app.config import Settings
from app.kit.errors import DomainError

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def origin_of(url: str) -> str | None:
    """`scheme://host[:port]`, lowercase, with the scheme's own port left out, or None for a non-URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    default_port = {"http": 80, "https": 443}[parts.scheme]
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port not in (None, default_port) else "")


def trusted_origin(settings: Settings) -> str | None:
    return origin_of(settings.base_url)


def is_trusted_url(url: str, settings: Settings, *, allow_relative: bool) -> bool:
    """A same-origin absolute URL, or (when allowed) a path on this service; never `//host` or `\\host`."""
    if allow_relative and url.startswith("/") and not url.startswith(("//", "/\\")):
        return True
    origin = origin_of(url)
    return origin is not None and origin == trusted_origin(settings)


def _validate_origin(request: Request, settings: Settings) -> None:
    claimed = request.headers.get("origin") or request.headers.get("referer") or ""
    if not claimed or claimed == "null":
        raise DomainError(403, "Missing or null Origin", code="MISSING_OR_NULL_ORIGIN")
    if origin_of(claimed) is None or origin_of(claimed) != trusted_origin(settings):
        raise DomainError(403, "Invalid origin", code="INVALID_ORIGIN")


def check_cookie_origin(request: Request) -> None:
    """Router dependency: cookie-carrying writes need this service's Origin. Requests without cookies
    (servers, scripts with a bearer token) cannot ride on a browser's session, so they pass."""
    if request.method in SAFE_METHODS or "cookie" not in request.headers:
        return
    _validate_origin(request, app_state(request).settings)


def check_sign_in_origin(request: Request) -> None:
    """For routes that start a session from a form (better-auth's formCsrfMiddleware): besides the
    cookie rule, a browser request (Fetch Metadata or an Origin present) must be same-origin too, so
    another site cannot sign a visitor in to an account of its choosing."""
    if request.method in SAFE_METHODS:
        return
    settings = app_state(request).settings
    headers = request.headers
    if "cookie" in headers:
        _validate_origin(request, settings)
        return
    site = headers.get("sec-fetch-site", "").strip()
    mode = headers.get("sec-fetch-mode", "").strip()
    dest = headers.get("sec-fetch-dest", "").strip()
    if site or mode or dest:
        if site == "cross-site" and mode == "navigate":
            raise DomainError(
                403,
                "Cross-site navigation login blocked. This request appears to be a CSRF attack.",
                code="CROSS_SITE_NAVIGATION_LOGIN_BLOCKED",
            )
        _validate_origin(request, settings)
    elif headers.get("origin") or headers.get("referer"):
        _validate_origin(request, settings)
