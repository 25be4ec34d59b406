"""Authlib's AuthorizationServer bound to one request's database session: the authorization code grant
(PKCE with S256 required of every client), the refresh token grant (rotating), and token storage.

Authlib ships server integrations for Flask and Django only; this module is the small part such an
integration does (requests in, responses out), over parameters the route has already read.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from authlib.oauth2.rfc6749 import (
    AuthorizationCodeMixin,
    AuthorizationServer,
    InvalidRequestError,
    OAuth2Payload,
    OAuth2Request,
    TokenMixin,
)
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant, RefreshTokenGrant
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.identity.oauth.clients import MAIL_SCOPE, RegisteredClient, find_client
from app.identity.tokens import OAUTH_ACCESS_TOKEN_PREFIX, OAUTH_REFRESH_TOKEN_PREFIX, hash_token
from app.kit.time import utcnow
from app.models import OAuthAuthorizationCode, OAuthToken, User

ACCESS_TOKEN_LIFETIME = timedelta(hours=1)
REFRESH_TOKEN_LIFETIME = timedelta(days=30)
# RFC 6749 recommends at most ten minutes.
AUTHORIZATION_CODE_LIFETIME = timedelta(minutes=10)
TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]


class ParameterPayload(OAuth2Payload):  # type: ignore[misc]
    """Request parameters (query or form) as Authlib reads them: first values, and every value."""

    def __init__(self, pairs: Sequence[tuple[str, str]]) -> None:
        self._datalist: defaultdict[str, list[str]] = defaultdict(list)
        for key, value in pairs:
            self._datalist[key].append(value)
        self._data = {key: values[0] for key, values in self._datalist.items()}

    @property
    def data(self) -> dict[str, str]:
        return self._data

    @property
    def datalist(self) -> defaultdict[str, list[str]]:
        return self._datalist


class ParameterRequest(OAuth2Request):  # type: ignore[misc]
    """An OAuth2Request over parameters the route read from the query string or the form body."""

    def __init__(
        self, method: str, uri: str, headers: Mapping[str, str], pairs: Sequence[tuple[str, str]]
    ) -> None:
        # Kept as given: Authlib reads `Authorization` by that spelling, so a case-insensitive mapping.
        super().__init__(method=method, uri=uri, headers=headers)
        self.payload = ParameterPayload(pairs)

    @property
    def args(self) -> dict[str, str]:
        return self.payload.data

    @property
    def form(self) -> dict[str, str]:
        return self.payload.data


@dataclass(frozen=True)
class OAuthReply:
    """What Authlib answered: a status, a JSON body or nothing, and headers (a Location for redirects)."""

    status: int
    body: dict[str, Any] | str
    headers: list[tuple[str, str]] = field(default_factory=list)


class IssuedCode(AuthorizationCodeMixin):  # type: ignore[misc]
    def __init__(self, row: OAuthAuthorizationCode) -> None:
        self.row = row
        # Read by Authlib's CodeChallenge extension.
        self.code_challenge = row.code_challenge
        self.code_challenge_method = row.code_challenge_method

    def get_redirect_uri(self) -> str | None:
        return self.row.redirect_uri

    def get_scope(self) -> str:
        return self.row.scope


class IssuedToken(TokenMixin):  # type: ignore[misc]
    def __init__(self, row: OAuthToken) -> None:
        self.row = row

    def check_client(self, client: RegisteredClient) -> bool:
        return self.row.client_id == client.row.id

    def get_scope(self) -> str:
        return self.row.scope

    def get_expires_in(self) -> int:
        return int(ACCESS_TOKEN_LIFETIME.total_seconds())

    def is_expired(self) -> bool:
        return self.row.access_expires_at <= utcnow()

    def is_revoked(self) -> bool:
        return self.row.revoked_at is not None


def _new_access_token(**_: Any) -> str:
    return OAUTH_ACCESS_TOKEN_PREFIX + secrets.token_urlsafe(32)


def _new_refresh_token(**_: Any) -> str:
    return OAUTH_REFRESH_TOKEN_PREFIX + secrets.token_urlsafe(32)


def revoke_chain(db: Session, authorization_code_id: int | None) -> list[int]:
    """Revoke every token descended from one authorization (a replayed code or refresh token means one
    of them leaked); returns the ids of the users they were issued to."""
    if authorization_code_id is None:
        return []
    user_ids = db.scalars(
        update(OAuthToken)
        .where(OAuthToken.authorization_code_id == authorization_code_id, OAuthToken.revoked_at.is_(None))
        .values(revoked_at=utcnow())
        .returning(OAuthToken.user_id)
    ).all()
    return list(set(user_ids))


class TidingsAuthorizationServer(AuthorizationServer):  # type: ignore[misc]
    def __init__(self, db: Session) -> None:
        super().__init__(scopes_supported=[MAIL_SCOPE])
        self.db = db
        # Accounts whose tokens this request revoked: the caller drops them from the token cache.
        self.revoked_account_ids: set[int] = set()
        self.register_token_generator(
            "default",
            BearerTokenGenerator(
                _new_access_token,
                _new_refresh_token,
                lambda client, grant_type: int(ACCESS_TOKEN_LIFETIME.total_seconds()),
            ),
        )
        self.register_grant(CodeGrant, [RequiredS256Challenge()])
        self.register_grant(RotatingRefreshGrant)
        self.register_endpoint(TokenRevocation)

    def note_revoked(self, user_ids: list[int]) -> None:
        if user_ids:
            accounts = self.db.scalars(select(User.account_id).where(User.id.in_(user_ids)))
            self.revoked_account_ids.update(accounts)

    def query_client(self, client_id: str) -> RegisteredClient | None:
        row = find_client(self.db, client_id) if isinstance(client_id, str) else None
        return RegisteredClient(row) if row is not None else None

    def save_token(self, token: dict[str, Any], request: ParameterRequest) -> None:
        now = utcnow()
        if request.authorization_code is not None:
            chain = request.authorization_code.row.id
        else:
            chain = request.refresh_token.row.authorization_code_id
        refresh = token.get("refresh_token")
        self.db.add(
            OAuthToken(
                client_id=request.client.row.id,
                user_id=request.user.id,
                authorization_code_id=chain,
                access_token_hash=hash_token(token["access_token"]),
                refresh_token_hash=hash_token(refresh) if refresh else None,
                scope=token.get("scope", ""),
                created_at=now,
                access_expires_at=now + ACCESS_TOKEN_LIFETIME,
                refresh_expires_at=now + REFRESH_TOKEN_LIFETIME if refresh else None,
            )
        )
        self.db.flush()

    def create_oauth2_request(self, request: ParameterRequest) -> ParameterRequest:
        return request

    def handle_response(self, status: int, body: Any, headers: list[tuple[str, str]]) -> OAuthReply:
        return OAuthReply(status, body, list(headers))

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        """No listeners."""


class RequiredS256Challenge(CodeChallenge):  # type: ignore[misc]
    """PKCE for every client, confidential ones included (OAuth 2.1), and only the S256 method: the
    `plain` method would hand the verifier to whoever sees the authorization request."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def validate_code_challenge(self, grant: CodeGrant, redirect_uri: str) -> None:
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("Missing 'code_challenge': PKCE with S256 is required.")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("'code_challenge_method' must be 'S256'.")
        super().validate_code_challenge(grant, redirect_uri)


class CodeGrant(AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = TOKEN_ENDPOINT_AUTH_METHODS
    server: TidingsAuthorizationServer

    def save_authorization_code(self, code: str, request: ParameterRequest) -> None:
        now = utcnow()
        data = request.payload.data
        self.server.db.add(
            OAuthAuthorizationCode(
                code_hash=hash_token(code),
                client_id=request.client.row.id,
                user_id=request.user.id,
                redirect_uri=request.payload.redirect_uri,
                scope=request.scope or MAIL_SCOPE,
                code_challenge=data["code_challenge"],
                code_challenge_method=data["code_challenge_method"],
                created_at=now,
                expires_at=now + AUTHORIZATION_CODE_LIFETIME,
            )
        )
        self.server.db.flush()

    def query_authorization_code(self, code: str, client: RegisteredClient) -> IssuedCode | None:
        db = self.server.db
        row = db.scalars(
            select(OAuthAuthorizationCode).where(
                OAuthAuthorizationCode.code_hash == hash_token(code),
                OAuthAuthorizationCode.client_id == client.row.id,
            )
        ).first()
        if row is None or row.expires_at <= utcnow():
            return None
        if row.used_at is not None:
            # RFC 6749 4.1.2: a code used twice SHOULD revoke what it was exchanged for.
            self.server.note_revoked(revoke_chain(db, row.id))
            return None
        return IssuedCode(row)

    def delete_authorization_code(self, authorization_code: IssuedCode) -> None:
        # Kept, marked used, so that a replay is recognised (see query_authorization_code).
        authorization_code.row.used_at = utcnow()
        self.server.db.flush()

    def authenticate_user(self, authorization_code: IssuedCode) -> User | None:
        return self.server.db.get(User, authorization_code.row.user_id)


class RotatingRefreshGrant(RefreshTokenGrant):  # type: ignore[misc]
    """Each refresh issues a new refresh token and revokes the old pair; presenting a revoked refresh
    token again revokes the whole chain (RFC 9700 4.14.2)."""

    TOKEN_ENDPOINT_AUTH_METHODS = TOKEN_ENDPOINT_AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True
    server: TidingsAuthorizationServer

    def authenticate_refresh_token(self, refresh_token: str) -> IssuedToken | None:
        db = self.server.db
        row = db.scalars(
            select(OAuthToken).where(OAuthToken.refresh_token_hash == hash_token(refresh_token))
        ).first()
        if row is None:
            return None
        if row.revoked_at is not None:
            self.server.note_revoked(revoke_chain(db, row.authorization_code_id))
            return None
        if row.refresh_expires_at is None or row.refresh_expires_at <= utcnow():
            return None
        return IssuedToken(row)

    def authenticate_user(self, refresh_token: IssuedToken) -> User | None:
        return self.server.db.get(User, refresh_token.row.user_id)

    def revoke_old_credential(self, refresh_token: IssuedToken) -> None:
        refresh_token.row.revoked_at = utcnow()
        self.server.note_revoked([refresh_token.row.user_id])
        self.server.db.flush()


class TokenRevocation(RevocationEndpoint):  # type: ignore[misc]
    """RFC 7009 (POST /oauth/revoke): an integration gives up an access or refresh token it holds. The
    whole grant goes with it, every token refreshed from the same authorization: revoking a refresh
    token SHOULD revoke its access tokens (2.1), and a grant whose token its app gave up is of no use to
    anyone else. A token unknown, or already revoked, is answered 200 all the same (2.2)."""

    CLIENT_AUTH_METHODS = TOKEN_ENDPOINT_AUTH_METHODS
    server: TidingsAuthorizationServer

    def query_token(self, token_string: str, token_type_hint: str | None) -> IssuedToken | None:
        # The hint only says where to look first (2.1): both columns are looked in, by one lookup.
        digest = hash_token(token_string)
        row = self.server.db.scalars(
            select(OAuthToken).where(
                or_(OAuthToken.access_token_hash == digest, OAuthToken.refresh_token_hash == digest)
            )
        ).first()
        return IssuedToken(row) if row is not None else None

    def revoke_token(self, token: IssuedToken, request: ParameterRequest) -> None:
        row = token.row
        if row.revoked_at is None:
            row.revoked_at = utcnow()
        self.server.note_revoked([row.user_id, *revoke_chain(self.server.db, row.authorization_code_id)])
        self.server.db.flush()
