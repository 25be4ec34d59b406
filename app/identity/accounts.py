"""Making accounts and their users (CLI, demo, sign-up), and the operator's changes to them (CLI)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from email_validator import EmailNotValidError, validate_email
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.identity.passwords import (
    MAX_PASSWORD_LENGTH,
    MIN_PASSWORD_LENGTH,
    PasswordProblem,
    hash_password,
    password_problem,
)
from app.kit.errors import DomainError
from app.kit.time import account_zone, local_day, midnight_after, utcnow
from app.models import Account, Plan, User, UserSession

USERNAME_MIN_LENGTH = 3
USERNAME_MAX_LENGTH = 30
# ASCII only (a str pattern's [a-z] does not match look-alikes such as Cyrillic letters); always used with
# fullmatch, since `$` would also match before a trailing newline.
USERNAME_PATTERN = re.compile(r"[a-zA-Z0-9_.]{3,30}")
_USERNAME_CHARACTERS = re.compile(r"[a-zA-Z0-9_.]+")


class UsernameProblem(StrEnum):
    """Why a username cannot be used; the values are better-auth's error codes."""

    TOO_SHORT = "USERNAME_TOO_SHORT"
    TOO_LONG = "USERNAME_TOO_LONG"
    INVALID = "INVALID_USERNAME"


def username_problem(username: str) -> UsernameProblem | None:
    """Checked in better-auth's order: length first, then the characters."""
    if len(username) < USERNAME_MIN_LENGTH:
        return UsernameProblem.TOO_SHORT
    if len(username) > USERNAME_MAX_LENGTH:
        return UsernameProblem.TOO_LONG
    if not _USERNAME_CHARACTERS.fullmatch(username):
        return UsernameProblem.INVALID
    return None


def email_key(email: str) -> str:
    """The form an e-mail address is looked up by: without surrounding whitespace (any Unicode
    whitespace), lower-cased. The sign-in throttle counts by the same key, so a padded or upper-cased
    spelling of a locked address is the same locked address."""
    return email.strip().lower()


def username_key(username: str) -> str:
    """Usernames are stored lowercase and compared lowercase."""
    return username.lower()


def find_user_by_email(session: Session, email: str) -> User | None:
    return session.scalars(select(User).where(User.email_key == email_key(email))).first()


def find_user_by_username(session: Session, username: str) -> User | None:
    """Call only with a valid username."""
    return session.scalars(select(User).where(User.username == username_key(username))).first()


def username_owner_id(session: Session, username: str) -> int | None:
    return session.scalars(select(User.id).where(User.username == username_key(username))).first()


_PASSWORD_MESSAGES = {
    PasswordProblem.EMPTY: "The password must not be empty.",
    PasswordProblem.TOO_SHORT: f"The password is too short: at least {MIN_PASSWORD_LENGTH} characters.",
    PasswordProblem.TOO_LONG: f"The password is too long: at most {MAX_PASSWORD_LENGTH} characters.",
}


def check_password(password: str) -> str:
    """Sign-up's password rules, as a DomainError(400) in words rather than better-auth's codes."""
    problem = password_problem(password)
    if problem is not None:
        raise DomainError(400, _PASSWORD_MESSAGES[problem])
    return password


def check_account_settings(
    *, plan: str | None = None, contact_limit: int | None = None, daily_send_limit: int | None = None
) -> None:
    """The rules of an account's plan and limits (None: not being set)."""
    if plan is not None and plan not in Plan.__members__.values():
        raise DomainError(400, f"Unknown plan {plan!r}: use one of {', '.join(Plan)}.")
    if contact_limit is not None and contact_limit < 0:
        raise DomainError(400, "The contact limit must not be negative.")
    if daily_send_limit is not None and daily_send_limit < 0:
        raise DomainError(400, "The daily send limit must not be negative.")


def create_user(
    session: Session,
    *,
    email: str,
    name: str,
    username: str | None = None,
    password: str | None = None,
    plan: str = "empire",
    contact_limit: int = 10000,
    timezone: str = "UTC",
    is_staff: bool = False,
    warmup_days: int = 0,
    daily_send_limit: int | None = None,
    display_username: str | None = None,
    image: str | None = None,
) -> User:
    """A user in a new account of its own. Raises DomainError(400) on any invalid or taken value."""
    try:
        email = validate_email(email.strip(), check_deliverability=False).normalized
    except EmailNotValidError as exc:
        raise DomainError(400, f"Invalid email: {exc}") from exc
    if not name.strip():
        raise DomainError(400, "The name must not be empty.")
    check_account_settings(plan=plan, contact_limit=contact_limit, daily_send_limit=daily_send_limit)
    if warmup_days < 0:
        raise DomainError(400, "The warm-up must not be negative.")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise DomainError(400, f"Unknown time zone {timezone!r}.") from exc
    if find_user_by_email(session, email) is not None:
        raise DomainError(400, f"A user with the email {email} already exists.")
    stored_username = None
    if username is not None:
        if username_problem(username) is not None:
            raise DomainError(400, "A username is 3 to 30 letters, digits, underscores or dots.")
        stored_username = username_key(username)
        if username_owner_id(session, username) is not None:
            raise DomainError(400, f"The username {username} is taken.")
    account = Account(
        plan=Plan(plan),
        contact_limit=contact_limit,
        timezone=timezone,
        warmup_until=midnight_after(utcnow(), warmup_days, account_zone(timezone)) if warmup_days else None,
        daily_send_limit=daily_send_limit,
    )
    session.add(account)
    session.flush()
    user = User(
        account_id=account.id,
        email=email,
        email_key=email_key(email),
        name=name.strip(),
        username=stored_username,
        display_username=display_username or username,
        password_hash=hash_password(password) if password else None,
        is_staff=is_staff,
        image=image,
    )
    session.add(user)
    session.flush()
    return user


def user_by_email(session: Session, email: str) -> User:
    """The user with this email (any case); DomainError(404) naming the email when there is none."""
    user = find_user_by_email(session, email)
    if user is None:
        raise DomainError(404, f"No user with the email {email.strip()}.")
    return user


@dataclass(frozen=True)
class UserSummary:
    """A user and their account's plan and limits, as the operator lists them."""

    id: int
    email: str
    name: str
    username: str | None
    is_staff: bool
    has_password: bool
    plan: str
    contacts_count: int
    contact_limit: int
    daily_send_limit: int | None
    created_at: datetime


def user_summaries(session: Session) -> list[UserSummary]:
    """Every user with their account, oldest first, in one query."""
    rows = session.execute(
        select(User, Account).join(Account, Account.id == User.account_id).order_by(User.id)
    ).all()
    return [
        UserSummary(
            id=user.id,
            email=user.email,
            name=user.name,
            username=user.username,
            is_staff=user.is_staff,
            has_password=user.password_hash is not None,
            plan=account.plan,
            contacts_count=account.contacts_count,
            contact_limit=account.contact_limit,
            daily_send_limit=account.daily_send_limit,
            created_at=user.created_at,
        )
        for user, account in rows
    ]


def update_account_settings(
    session: Session,
    user: User,
    *,
    plan: str | None = None,
    contact_limit: int | None = None,
    daily_send_limit: int | None = None,
    default_daily_send_limit: bool = False,
    is_staff: bool | None = None,
) -> Account:
    """Change what is given (None: unchanged); `default_daily_send_limit` puts the account back on the
    server's TIDINGS_DAILY_SEND_LIMIT.

    A contact limit below the contacts already held is allowed: the account keeps them and may add
    no more until it is under the limit again.
    """
    check_account_settings(plan=plan, contact_limit=contact_limit, daily_send_limit=daily_send_limit)
    if default_daily_send_limit and daily_send_limit is not None:
        raise DomainError(400, "Give a daily send limit or go back to the default, not both.")
    account = session.scalars(select(Account).where(Account.id == user.account_id).with_for_update()).one()
    if plan is not None:
        account.plan = Plan(plan)
    if contact_limit is not None:
        account.contact_limit = contact_limit
    if daily_send_limit is not None or default_daily_send_limit:
        account.daily_send_limit = daily_send_limit
    if is_staff is not None:
        user.is_staff = is_staff
    session.flush()
    return account


def set_user_password(session: Session, user: User, password: str) -> int:
    """Give the user a new password under sign-up's rules and end their sign-in sessions (whoever
    knew the old password is signed out); returns how many sessions ended. Tokens keep working."""
    user.password_hash = hash_password(check_password(password))
    ended = session.execute(delete(UserSession).where(UserSession.user_id == user.id))
    session.flush()
    return int(getattr(ended, "rowcount", 0) or 0)


def daily_cap(own: int | None, default: int) -> int:
    """The emails an account may hand to the senders per local day: its own cap, else the operator's
    TIDINGS_DAILY_SEND_LIMIT; 0 is no cap."""
    return own if own is not None else default


@dataclass(frozen=True)
class SendingAllowance:
    """The sending limits as they apply to an account now (the console's Account page)."""

    daily_cap: int
    own_cap: bool
    sent_today: int
    warmup_until: datetime | None
    warming_up: bool


def sending_allowance(account: Account, default_daily_cap: int, now: datetime) -> SendingAllowance:
    today = local_day(now, account_zone(account.timezone))
    warmup_until = account.warmup_until
    if warmup_until is not None and warmup_until.tzinfo is None:
        warmup_until = warmup_until.replace(tzinfo=UTC)
    return SendingAllowance(
        daily_cap=daily_cap(account.daily_send_limit, default_daily_cap),
        own_cap=account.daily_send_limit is not None,
        sent_today=account.sent_today if account.sent_day == today else 0,
        warmup_until=warmup_until,
        warming_up=warmup_until is not None and warmup_until > now,
    )
