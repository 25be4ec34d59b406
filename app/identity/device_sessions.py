"""The command-line device session (RFC 8628 in spirit): the command line starts one and shows its user
code, a signed-in user approves that code, and the command line polls with its device code until its one
personal access token is issued. Both codes are stored only as SHA-256 hashes."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from hmac import compare_digest

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.identity.tokens import create_personal_token, hash_token
from app.kit.errors import DomainError
from app.kit.time import utcnow
from app.models import DeviceSession, User

DEVICE_SESSION_LIFETIME = timedelta(minutes=10)
POLL_INTERVAL = 5  # seconds
SLOW_DOWN_STEP = 5  # seconds added to the interval at each `slow_down` (RFC 8628 section 3.5)
# No vowels (no words) and nothing confusable (0/O, 1/I/l): 19**8, about 1.7e10 codes.
USER_CODE_ALPHABET = "BCDFGHJKMNPQRSTVWXZ"
USER_CODE_LENGTH = 8
TOKEN_NAME = "command line (device session)"


def poll_error(code: str, detail: str) -> DomainError:
    return DomainError(400, detail, code=code)


@dataclass(frozen=True)
class Started:
    device_code: str
    user_code: str
    expires_in: int
    interval: int
    # The row's id: openmagpie's command line polls GET /v1/auth/device-sessions/{session_id}, proving
    # itself with the device code (its `device_secret`).
    session_id: int


def normalize_user_code(value: str) -> str:
    """`bcdf-ghjk`, `BCDFGHJK` and `BCDF GHJK` are one code."""
    return "".join(c for c in value if c.isascii() and c.isalnum()).upper()


def start_device_session(db: Session) -> Started:
    raw = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(USER_CODE_LENGTH))
    user_code = f"{raw[:4]}-{raw[4:]}"
    device_code = secrets.token_urlsafe(32)
    row = DeviceSession(
        device_code_hash=hash_token(device_code),
        user_code_hash=hash_token(normalize_user_code(user_code)),
        expires_at=utcnow() + DEVICE_SESSION_LIFETIME,
        interval=POLL_INTERVAL,
    )
    db.add(row)
    db.flush()
    return Started(
        device_code, user_code, int(DEVICE_SESSION_LIFETIME.total_seconds()), POLL_INTERVAL, row.id
    )


def complete_device_session(db: Session, user_code: str, user_id: int, *, approve: bool) -> None:
    """The signed-in user approves (or denies) the session whose user code they typed."""
    normalized = normalize_user_code(user_code)
    row = (
        db.scalars(
            select(DeviceSession).where(DeviceSession.user_code_hash == hash_token(normalized))
        ).first()
        if len(normalized) == USER_CODE_LENGTH
        else None
    )
    if row is None:
        raise DomainError(404, "No device session has this code.", code="not_found")
    if row.expires_at <= utcnow():
        raise DomainError(400, "This device session has expired; start a new one.", code="expired_token")
    if row.user_id is not None or row.denied:
        raise DomainError(409, "This device session was already completed.", code="already_completed")
    if approve:
        row.user_id = user_id
    else:
        row.denied = True
    db.flush()


def poll_device_session(db: Session, device_code: str) -> tuple[str, User]:
    """The token and its user once approved, issued once; else the RFC 8628 error of the moment."""
    row = db.scalars(
        select(DeviceSession).where(DeviceSession.device_code_hash == hash_token(device_code))
    ).first()
    if row is None or row.consumed_at is not None:
        raise poll_error("invalid_grant", "Unknown or already used device code.")
    now = utcnow()
    if row.expires_at <= now:
        raise poll_error("expired_token", "The device session expired; start a new one.")
    if row.denied:
        raise poll_error("access_denied", "The user refused this device session.")
    if row.user_id is None:
        too_soon = row.last_polled_at is not None and now - row.last_polled_at < timedelta(
            seconds=row.interval
        )
        row.last_polled_at = now
        if too_soon:
            row.interval += SLOW_DOWN_STEP
            db.flush()
            raise poll_error("slow_down", f"Poll at most every {row.interval} seconds.")
        db.flush()
        raise poll_error("authorization_pending", "Waiting for a signed-in user to approve the code.")
    user = _claim(db, row, now)
    if user is None:
        raise poll_error("invalid_grant", "Unknown or already used device code.")
    _, token = create_personal_token(db, user, TOKEN_NAME)
    return token, user


def _claim(db: Session, row: DeviceSession, now: datetime) -> User | None:
    """The approving user, once: the conditional UPDATE lets one of two racing polls through."""
    claimed = db.execute(
        update(DeviceSession)
        .where(DeviceSession.id == row.id, DeviceSession.consumed_at.is_(None))
        .values(consumed_at=now, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    if getattr(claimed, "rowcount", 0) != 1 or row.user_id is None:
        return None
    return db.get(User, row.user_id)


@dataclass(frozen=True)
class SessionPoll:
    """openmagpie's poll answer: `pending`, `expired`, or `completed` with the approving user."""

    status: str
    user: User | None = None


def poll_session_by_id(db: Session, session_id: str, device_secret: str, now: datetime) -> SessionPoll:
    """GET /v1/auth/device-sessions/{id} (openmagpie's command line, every 2 seconds: it cannot slow
    down, so it is not told to). Unknown, used, or a wrong secret: 404; denied: 403 `access_denied`."""
    row = (
        db.get(DeviceSession, int(session_id))
        if session_id.isdigit() and len(session_id) < 19 and device_secret
        else None
    )
    if (
        row is None
        or row.consumed_at is not None
        or not compare_digest(row.device_code_hash, hash_token(device_secret))
    ):
        raise DomainError(404, "No such device session.", code="not_found")
    if row.expires_at <= now:
        return SessionPoll("expired")
    if row.denied:
        raise DomainError(403, "The user refused this device session.", code="access_denied")
    if row.user_id is None:
        row.last_polled_at = now
        db.flush()
        return SessionPoll("pending")
    user = _claim(db, row, now)
    if user is None:
        raise DomainError(404, "No such device session.", code="not_found")
    return SessionPoll("completed", user)
