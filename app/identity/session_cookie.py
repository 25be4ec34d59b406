"""The session cookie `tidings.session_token`: the session token and an HMAC of it, as better-auth signs
its cookies, so a forged or altered cookie is refused without a database query."""

from __future__ import annotations

import base64
import hashlib
import hmac
from urllib.parse import urlsplit

from fastapi import Request, Response

from app.config import Settings
from app.identity.sessions import SESSION_LIFETIME

SESSION_COOKIE = "tidings.session_token"


def _signature(token: str, secret: str) -> str:
    digest = hmac.new(secret.encode(), token.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def signed_value(token: str, secret: str) -> str:
    return f"{token}.{_signature(token, secret)}"


def token_of(value: str, secret: str) -> str | None:
    """The token inside a signed cookie value, or None when the signature does not match."""
    token, dot, signature = value.rpartition(".")
    if not dot or not token:
        return None
    if not hmac.compare_digest(signature.encode(), _signature(token, secret).encode()):
        return None
    return token


def session_token(request: Request, settings: Settings) -> str | None:
    value = request.cookies.get(SESSION_COOKIE)
    return token_of(value, settings.resolved_secret_key) if value else None


def uses_https(settings: Settings) -> bool:
    return urlsplit(settings.base_url).scheme == "https"


def set_session_cookie(response: Response, token: str, settings: Settings, *, remember: bool) -> None:
    # Path=/ because the same cookie signs in to /v1 and the HTML pages as well as /api/auth.
    response.set_cookie(
        SESSION_COOKIE,
        signed_value(token, settings.resolved_secret_key),
        max_age=int(SESSION_LIFETIME.total_seconds()) if remember else None,
        path="/",
        secure=uses_https(settings),
        httponly=True,
        samesite="lax",
    )


def clear_session_cookie(response: Response, settings: Settings) -> None:
    response.delete_cookie(
        SESSION_COOKIE, path="/", secure=uses_https(settings), httponly=True, samesite="lax"
    )
