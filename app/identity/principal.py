"""Who a request acts for: a read-only snapshot of the user and account behind a credential.

A snapshot rather than ORM rows: it is loaded by one query on the authentication path (which may run
on the event loop with the asynchronous driver) and only read afterwards; writes to the account go
through UPDATE statements of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, bindparam, null, select

from app.models import Account, OAuthToken, PersonalToken, User
from app.models.base import UTCDateTime


@dataclass(frozen=True)
class AccountInfo:
    id: int
    plan: str
    contact_limit: int
    contacts_count: int
    contacts_version: int
    timezone: str
    warmup_until: datetime | None
    # Whether its emails may carry the open pixel (its PATCH /me switch).
    track_opens: bool = True
    public_archive: bool = False


@dataclass(frozen=True)
class UserInfo:
    id: int
    account_id: int
    email: str
    name: str
    is_staff: bool
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Principal:
    user: UserInfo
    account: AccountInfo
    # The personal token used, with when it was last marked used; None for other credentials.
    token_id: int | None = None
    token_last_used_at: datetime | None = None


def principal_of(user: User, account: Account) -> Principal:
    """A snapshot from ORM rows (command-line tools acting for a user)."""
    return Principal(
        user=UserInfo(
            user.id, user.account_id, user.email, user.name, user.is_staff, user.created_at, user.updated_at
        ),
        account=AccountInfo(
            account.id,
            account.plan,
            account.contact_limit,
            account.contacts_count,
            account.contacts_version,
            account.timezone,
            account.warmup_until,
            account.track_opens,
            account.public_archive,
        ),
    )


# The user and account columns both token queries read, in the order the principal is built from.
_PRINCIPAL_COLUMNS = (
    User.id,
    User.account_id,
    User.email,
    User.name,
    User.is_staff,
    User.created_at,
    User.updated_at,
    Account.plan,
    Account.contact_limit,
    Account.contacts_count,
    Account.contacts_version,
    Account.timezone,
    Account.warmup_until,
    Account.track_opens,
    Account.public_archive,
)


def by_token_hash() -> Select[Any]:
    """The one query behind bearer-token authentication; `token_hash` is its only parameter."""
    query: Select[Any] = (
        select(  # type: ignore[assignment]
            PersonalToken.id,
            PersonalToken.last_used_at,
            *_PRINCIPAL_COLUMNS,
        )
        .join(User, User.id == PersonalToken.user_id)
        .join(Account, Account.id == User.account_id)
        .where(PersonalToken.token_hash == bindparam("token_hash"), PersonalToken.revoked_at.is_(None))
    )
    return query


def by_oauth_access_token_hash() -> Select[Any]:
    """The same principal for an OAuth access token that is neither revoked nor expired at `now`. The
    two token columns are null: an OAuth token's use is not recorded."""
    query: Select[Any] = (
        select(  # type: ignore[assignment]
            null().label("token_id"),
            null().label("token_last_used_at"),
            *_PRINCIPAL_COLUMNS,
        )
        .select_from(OAuthToken)
        .join(User, User.id == OAuthToken.user_id)
        .join(Account, Account.id == User.account_id)
        .where(
            OAuthToken.access_token_hash == bindparam("token_hash"),
            OAuthToken.revoked_at.is_(None),
            OAuthToken.access_expires_at > bindparam("now", type_=UTCDateTime()),
        )
    )
    return query


def _utc(value: datetime | None) -> datetime | None:
    # The asynchronous driver hands back naive timestamps; the ORM path already attaches UTC.
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def principal_from_row(row: Any) -> Principal:
    (
        token_id,
        last_used,
        user_id,
        account_id,
        email,
        name,
        is_staff,
        created,
        updated,
        plan,
        contact_limit,
        contacts_count,
        contacts_version,
        timezone,
        warmup_until,
        track_opens,
        public_archive,
    ) = row
    return Principal(
        user=UserInfo(user_id, account_id, email, name, bool(is_staff), _utc(created), _utc(updated)),  # type: ignore[arg-type]
        account=AccountInfo(
            account_id,
            plan,
            contact_limit,
            contacts_count,
            contacts_version,
            timezone,
            _utc(warmup_until),
            bool(track_opens),
            bool(public_archive),
        ),
        token_id=token_id,
        token_last_used_at=_utc(last_used),
    )
