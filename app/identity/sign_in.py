"""Signing in with a username and password: the credential check, with the same argon2 work whether or
not the user exists, and the throttle on repeated failures."""

from __future__ import annotations

import hashlib

from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from app.identity.accounts import find_user_by_email, find_user_by_username, username_problem
from app.identity.auth_errors import AuthCode, auth_error
from app.identity.passwords import verify_password
from app.identity.sessions import SignedIn, start_session
from app.kit.ratelimit import RateDecision, RateLimiter
from app.models import User

# Failed sign-ins allowed per username and per client address in a moving window of 15 minutes. The
# address limit is far higher, so people behind one address (an office, a NAT) are not locked out
# together by one of them, or by someone guessing at their usernames.
FAILURES_PER_USERNAME = "10/15 minutes"
FAILURES_PER_ADDRESS = "100/15 minutes"


def check_credentials(db: Session, username: str, password: str, *, by_email: bool = False) -> User | None:
    """The user these credentials belong to, or None. A malformed or unknown username, a user without a
    password and a wrong password all cost one argon2 verification, so timing tells them apart no more
    than the answer does."""
    if by_email:
        usable = 0 < len(username) <= 191 and "\x00" not in username
        user = find_user_by_email(db, username) if usable else None
    else:
        user = find_user_by_username(db, username) if username_problem(username) is None else None
    if user is None or user.password_hash is None:
        verify_password(password, None)
        return None
    return user if verify_password(password, user.password_hash) else None


def _username_key(username: str) -> str:
    # Hashed: a 10 KB username would otherwise be a 10 KB key in the limiter's storage.
    return hashlib.sha256(username.lower().encode("utf-8", "surrogatepass")).hexdigest()


class SignInThrottle:
    """Counts failed sign-ins per username and per client address. Once either is over its limit, every
    sign-in for that username (or from that address) is refused, the right password included, until the
    oldest failure leaves the window: a refusal tells nothing about the guess that was refused."""

    def __init__(self, redis_url: str = "") -> None:
        self.by_username = RateLimiter(FAILURES_PER_USERNAME, redis_url, exact=True)
        self.by_address = RateLimiter(FAILURES_PER_ADDRESS, redis_url, exact=True)

    async def refusal(self, username: str, address: str) -> RateDecision | None:
        """The decision that refuses this attempt, or None when it may go ahead."""
        for decision in (
            await self.by_username.peek("sign-in-username", _username_key(username)),
            await self.by_address.peek("sign-in-address", address),
        ):
            if not decision.allowed:
                return decision
        return None

    async def record_failure(self, username: str, address: str) -> None:
        await self.by_username.hit("sign-in-username", _username_key(username))
        await self.by_address.hit("sign-in-address", address)


def _check_and_start(
    db: Session,
    username: str,
    password: str,
    remember: bool,
    address: str,
    user_agent: str | None,
    by_email: bool = False,
) -> SignedIn | None:
    user = check_credentials(db, username, password, by_email=by_email)
    if user is None:
        return None
    return start_session(db, user, remember=remember, ip_address=address, user_agent=user_agent)


async def sign_in_with_password(
    db: Session,
    throttle: SignInThrottle,
    *,
    username: str,
    password: str,
    address: str,
    user_agent: str | None,
    remember: bool = True,
    by_email: bool = False,
) -> SignedIn:
    """A new session for these credentials (`username` is an e-mail address when `by_email`).
    429 TOO_MANY_REQUESTS (with Retry-After) while throttled,
    else 401 INVALID_USERNAME_OR_PASSWORD for any failure, which counts against the throttle."""
    refusal = await throttle.refusal(username, address)
    if refusal is not None:
        wait = str(refusal.retry_after)
        raise auth_error(
            429, AuthCode.TOO_MANY_REQUESTS, headers={"Retry-After": wait, "X-Retry-After": wait}
        )
    # argon2 takes tens of milliseconds: a worker thread, not the event loop.
    signed_in = await run_in_threadpool(
        _check_and_start, db, username, password, remember, address, user_agent, by_email
    )
    if signed_in is None:
        await throttle.record_failure(username, address)
        raise auth_error(401, AuthCode.INVALID_USERNAME_OR_PASSWORD)
    return signed_in
