"""The steps of the authorization code flow as the routes take them: review an authorization request
(for the consent page), record the person's decision, and exchange a code or refresh token."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from authlib.oauth2 import OAuth2Error
from sqlalchemy.orm import Session

from app.config import Settings
from app.identity.oauth.server import (
    OAuthReply,
    ParameterRequest,
    TidingsAuthorizationServer,
    TokenRevocation,
)
from app.models import User

AUTHORIZE_PATH = "/oauth/authorize"
TOKEN_PATH = "/oauth/token"
REVOKE_PATH = "/oauth/revoke"
# What the consent form carries back; anything else in the query string is dropped.
AUTHORIZE_PARAMETERS = (
    "response_type",
    "client_id",
    "redirect_uri",
    "scope",
    "state",
    "code_challenge",
    "code_challenge_method",
)


@dataclass(frozen=True)
class ConsentRequest:
    """A valid authorization request, to be shown to the person for a decision."""

    client_name: str
    scope: str
    parameters: list[tuple[str, str]]


@dataclass(frozen=True)
class AuthorizationRefused:
    """A request that cannot be sent back to the client (unknown client, unregistered redirect URI):
    RFC 6749 says to tell the person instead of redirecting."""

    message: str


@dataclass(frozen=True)
class TokenExchange:
    reply: OAuthReply
    # Accounts whose tokens the exchange revoked (a refresh, or a replayed code).
    revoked_account_ids: set[int] = field(default_factory=set)


def _request(
    settings: Settings,
    method: str,
    path: str,
    pairs: Sequence[tuple[str, str]],
    headers: Mapping[str, str] | None = None,
) -> ParameterRequest:
    # The public address, not the one the proxy forwarded to: Authlib refuses plain http off loopback.
    return ParameterRequest(method, settings.base_url.rstrip("/") + path, headers or {}, pairs)


def _refused(server: TidingsAuthorizationServer, error: OAuth2Error) -> OAuthReply | AuthorizationRefused:
    if error.redirect_uri:
        # The client and its redirect URI were verified: the error goes back to the client.
        return server.handle_error_response(None, error)  # type: ignore[no-any-return]
    description = f": {error.description}" if error.description else ""
    return AuthorizationRefused(f"{error.error}{description}")


def review_authorization(
    db: Session, settings: Settings, pairs: Sequence[tuple[str, str]], user: User | None
) -> ConsentRequest | OAuthReply | AuthorizationRefused:
    server = TidingsAuthorizationServer(db)
    try:
        request = _request(settings, "GET", AUTHORIZE_PATH, pairs)
        grant = server.get_consent_grant(request, end_user=user)
    except OAuth2Error as error:
        return _refused(server, error)
    except ValueError:
        # Authlib refuses to quote text outside printable ASCII (an odd redirect_uri) in an error.
        return AuthorizationRefused("invalid_request: the authorization request is malformed.")
    return ConsentRequest(
        client_name=grant.client.row.name,
        scope=grant.request.scope,
        parameters=[(key, value) for key, value in pairs if key in AUTHORIZE_PARAMETERS],
    )


def decide_authorization(
    db: Session, settings: Settings, pairs: Sequence[tuple[str, str]], user: User, *, approved: bool
) -> OAuthReply | AuthorizationRefused:
    """Approved: a code, sent to the client's redirect URI. Denied: `access_denied`, sent there too."""
    server = TidingsAuthorizationServer(db)
    try:
        request = _request(settings, "POST", AUTHORIZE_PATH, pairs)
        grant = server.get_consent_grant(request, end_user=user)
        reply: OAuthReply = server.create_authorization_response(
            request, grant_user=user if approved else None, grant=grant
        )
    except OAuth2Error as error:
        return _refused(server, error)
    except ValueError:
        return AuthorizationRefused("invalid_request: the authorization request is malformed.")
    return reply


def exchange_token(
    db: Session, settings: Settings, pairs: Sequence[tuple[str, str]], headers: Mapping[str, str]
) -> TokenExchange:
    server = TidingsAuthorizationServer(db)
    try:
        request = _request(settings, "POST", TOKEN_PATH, pairs, headers)
        reply: OAuthReply = server.create_token_response(request)
    except OAuth2Error as error:
        reply = server.handle_error_response(None, error)
    except ValueError:
        # A Basic header that is not base64 of UTF-8, or text Authlib will not quote in an error.
        reply = OAuthReply(400, {"error": "invalid_request"})
    return TokenExchange(reply, server.revoked_account_ids)


def revoke_token_request(
    db: Session, settings: Settings, pairs: Sequence[tuple[str, str]], headers: Mapping[str, str]
) -> TokenExchange:
    """RFC 7009's revocation request: the client authenticated as at the token endpoint, the token
    revoked with its grant (TokenRevocation)."""
    server = TidingsAuthorizationServer(db)
    try:
        request = _request(settings, "POST", REVOKE_PATH, pairs, headers)
        reply: OAuthReply = server.create_endpoint_response(TokenRevocation.ENDPOINT_NAME, request)
    except OAuth2Error as error:
        reply = server.handle_error_response(None, error)
    except ValueError:
        reply = OAuthReply(400, {"error": "invalid_request"})
    return TokenExchange(reply, server.revoked_account_ids)
