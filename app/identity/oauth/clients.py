"""Registered OAuth clients: registration, listing and deletion (`tidings oauth-clients`) and the view
of a client that Authlib's grants ask questions of."""

from __future__ import annotations

import hmac
import secrets
from ipaddress import ip_address
from urllib.parse import urlsplit

from authlib.oauth2.rfc6749 import ClientMixin
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.identity.tokens import hash_token
from app.kit.errors import DomainError
from app.models import OAuthClient, User

# The only scope: the email API. A client that asks for none gets it.
MAIL_SCOPE = "mail"
GRANT_TYPES = ("authorization_code", "refresh_token")
SECRET_AUTH_METHODS = ("client_secret_basic", "client_secret_post")
REDIRECT_URI_MAX_LENGTH = 2048


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def check_redirect_uri(uri: str) -> str:
    """An absolute https URL, or http on a loopback address (RFC 8252's native apps), without a fragment."""
    try:
        parts = urlsplit(uri)
    except ValueError as exc:
        raise DomainError(400, f"Invalid redirect URI {uri!r}.") from exc
    if len(uri) > REDIRECT_URI_MAX_LENGTH or any(ord(c) < 0x21 or ord(c) > 0x7E for c in uri):
        raise DomainError(
            400, f"Invalid redirect URI {uri!r}: printable ASCII only, at most 2048 characters."
        )
    if parts.fragment or "#" in uri:
        raise DomainError(400, f"Invalid redirect URI {uri!r}: it must not have a fragment.")
    if not parts.hostname or parts.scheme not in ("https", "http"):
        raise DomainError(400, f"Invalid redirect URI {uri!r}: it must be an absolute https URL.")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise DomainError(400, f"Invalid redirect URI {uri!r}: plain http is allowed only on loopback.")
    return uri


def register_client(
    db: Session, owner: User, name: str, redirect_uris: list[str], *, public: bool = False
) -> tuple[OAuthClient, str | None]:
    """A new client; returns it and its secret (None for a public client), which is shown only now."""
    name = name.strip()
    if not name or len(name) > 191:
        raise DomainError(400, "The client name must be 1 to 191 characters.")
    if not redirect_uris:
        raise DomainError(400, "Give at least one redirect URI.")
    uris = list(dict.fromkeys(check_redirect_uri(uri) for uri in redirect_uris))
    secret = None if public else secrets.token_urlsafe(32)
    client = OAuthClient(
        client_id=secrets.token_urlsafe(18),
        client_secret_hash=hash_token(secret) if secret else None,
        name=name,
        owner_user_id=owner.id,
        redirect_uris="\n".join(uris),
    )
    db.add(client)
    db.flush()
    return client, secret


def find_client(db: Session, client_id: str) -> OAuthClient | None:
    if not client_id or len(client_id) > 64:
        return None
    return db.scalars(select(OAuthClient).where(OAuthClient.client_id == client_id)).first()


class RegisteredClient(ClientMixin):  # type: ignore[misc]
    """A client row as Authlib's ClientMixin."""

    def __init__(self, row: OAuthClient) -> None:
        self.row = row
        self.redirect_uris = row.redirect_uris.split("\n")

    @property
    def is_public(self) -> bool:
        return self.row.client_secret_hash is None

    def get_client_id(self) -> str:
        return self.row.client_id

    def get_default_redirect_uri(self) -> str | None:
        # Only an unambiguous one: with several registered, the request must name its own.
        return self.redirect_uris[0] if len(self.redirect_uris) == 1 else None

    def get_allowed_scope(self, scope: str | None) -> str | None:
        if not scope:
            return MAIL_SCOPE
        requested = set(scope.split())
        return MAIL_SCOPE if requested == {MAIL_SCOPE} else None

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        stored = self.row.client_secret_hash
        return stored is not None and hmac.compare_digest(stored, hash_token(client_secret))

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == "none" if self.is_public else method in SECRET_AUTH_METHODS

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in GRANT_TYPES


def clients_with_owners(db: Session) -> list[tuple[OAuthClient, str]]:
    """Every registered client with its owner's email, oldest first (the CLI)."""
    query = select(OAuthClient, User.email).join(User, User.id == OAuthClient.owner_user_id)
    return [(client, email) for client, email in db.execute(query.order_by(OAuthClient.id)).all()]


def delete_client(db: Session, client_id: str) -> OAuthClient:
    """Delete a client and, by cascade, its codes and tokens: its integrations stop at once (a serving
    process may accept an access token it looked up for up to a second more)."""
    client = find_client(db, client_id)
    if client is None:
        raise DomainError(404, f"No OAuth client with the client_id {client_id}.")
    db.execute(delete(OAuthClient).where(OAuthClient.id == client.id))
    db.flush()
    return client
