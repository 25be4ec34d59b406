"""Making accounts and their users (CLI, demo, sign-up)."""

from __future__ import annotations

import re
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from email_validator import EmailNotValidError, validate_email
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.identity.passwords import hash_password
from app.kit.errors import DomainError
from app.kit.time import account_zone, midnight_after, utcnow
from app.models import PLANS, Account, User

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


def find_user_by_email(session: Session, email: str) -> User | None:
    return session.scalars(select(User).where(User.email_key == email.strip().lower())).first()


def find_user_by_username(session: Session, username: str) -> User | None:
    """Usernames are stored lowercase and compared lowercase. Call only with a valid username."""
    return session.scalars(select(User).where(User.username == username.lower())).first()


def username_owner_id(session: Session, username: str) -> int | None:
    return session.scalars(select(User.id).where(User.username == username.lower())).first()


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
    if plan not in PLANS:
        raise DomainError(400, f"Unknown plan {plan!r}: use one of {', '.join(PLANS)}.")
    if contact_limit < 0:
        raise DomainError(400, "The contact limit must not be negative.")
    if warmup_days < 0:
        raise DomainError(400, "The warm-up must not be negative.")
    if daily_send_limit is not None and daily_send_limit < 0:
        raise DomainError(400, "The daily send limit must not be negative.")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise DomainError(400, f"Unknown time zone {timezone!r}.") from exc
    if find_user_by_email(session, email) is not None:
        raise DomainError(400, f"A user with the email {email} already exists.")
    username_key = None
    if username is not None:
        if username_problem(username) is not None:
            raise DomainError(400, "A username is 3 to 30 letters, digits, underscores or dots.")
        username_key = username.lower()
        if username_owner_id(session, username) is not None:
            raise DomainError(400, f"The username {username} is taken.")
    account = Account(
        plan=plan,
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
        email_key=email.lower(),
        name=name.strip(),
        username=username_key,
        display_username=display_username or username,
        password_hash=hash_password(password) if password else None,
        is_staff=is_staff,
        image=image,
    )
    session.add(user)
    session.flush()
    return user
