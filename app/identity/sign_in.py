"""Signing in with a username and password: the credential check, with the same argon2 work whether or
not the user exists, and the throttle on repeated failures."""

from __future__ import annotations

import hashlib

from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from app.identity.accounts import (
    email_key,
    find_user_by_email,
    find_user_by_username,
    username_key,
    username_problem,
)
from app.identity.auth_errors import AuthCode, auth_error
from app.identity.passwords import verify_password
from app.identity.sessions import SignedIn, start_session
from app.kit.errors import DomainError
from app.kit.ratelimit import RateDecision, RateLimiter
from app.models import User

# Failed sign-ins allowed in a moving window of 15 minutes: per identifier as looked up, per account
# (whichever identifier named it: username and e-mail address share one budget) and per client address.
# The address limit is far higher, so people behind one address (an office, a NAT) are not locked out
# together by one of them, or by someone guessing at their usernames.
FAILURES_PER_IDENTIFIER = "10/15 minutes"
FAILURES_PER_ACCOUNT = "10/15 minutes"
FAILURES_PER_ADDRESS = "100/15 minutes"


def identifier_key(identifier: str, *, by_email: bool) -> str:
    """The identifier exactly as the account lookup reads it, hashed: a 10 KB username would otherwise
    be a 10 KB key in the limiter's storage."""
    looked_up = email_key(identifier) if by_email else username_key(identifier)
    return hashlib.sha256(looked_up.encode("utf-8", "surrogatepass")).hexdigest()


def find_sign_in_user(db: Session, identifier: str, *, by_email: bool) -> User | None:
    """The user an identifier names, or None when it is malformed or unknown."""
    if by_email:
        usable = 0 < len(identifier) <= 191 and "\x00" not in identifier
        return find_user_by_email(db, identifier) if usable else None
    return find_user_by_username(db, identifier) if username_problem(identifier) is None else None


def password_matches(user: User | None, password: str) -> bool:
    """An unknown user and a user without a password cost one argon2 verification like a wrong
    password, so timing tells them apart no more than the answer does."""
    if user is None or user.password_hash is None:
        verify_password(password, None)
        return False
    return verify_password(password, user.password_hash)


class SignInThrottle:
    """Counts failed sign-ins per identifier, per account and per client address. Once any is over its
    limit, every sign-in for that identifier, account or address is refused, the right password
    included, until the oldest failure leaves the window: a refusal tells nothing about the guess that
    was refused."""

    def __init__(self, redis_url: str = "") -> None:
        self.by_identifier = RateLimiter(FAILURES_PER_IDENTIFIER, redis_url, exact=True)
        self.by_account = RateLimiter(FAILURES_PER_ACCOUNT, redis_url, exact=True)
        self.by_address = RateLimiter(FAILURES_PER_ADDRESS, redis_url, exact=True)

    async def refusal(self, identifier_key: str, address: str) -> RateDecision | None:
        """The decision that refuses this attempt before its account is known, or None."""
        for decision in (
            await self.by_identifier.peek("sign-in-identifier", identifier_key),
            await self.by_address.peek("sign-in-address", address),
        ):
            if not decision.allowed:
                return decision
        return None

    async def account_refusal(self, user_id: int) -> RateDecision | None:
        decision = await self.by_account.peek("sign-in-account", str(user_id))
        return None if decision.allowed else decision

    async def record_failure(self, identifier_key: str, address: str, user_id: int | None) -> None:
        await self.by_identifier.hit("sign-in-identifier", identifier_key)
        await self.by_address.hit("sign-in-address", address)
        if user_id is not None:
            await self.by_account.hit("sign-in-account", str(user_id))


def _too_many(decision: RateDecision) -> DomainError:
    wait = str(decision.retry_after)
    return auth_error(429, AuthCode.TOO_MANY_REQUESTS, headers={"Retry-After": wait, "X-Retry-After": wait})


def _verify_and_start(
    db: Session,
    user: User | None,
    password: str,
    remember: bool,
    address: str,
    user_agent: str | None,
) -> SignedIn | None:
    if not password_matches(user, password) or user is None:
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
    key = identifier_key(username, by_email=by_email)
    refusal = await throttle.refusal(key, address)
    if refusal is not None:
        raise _too_many(refusal)
    user = await run_in_threadpool(find_sign_in_user, db, username, by_email=by_email)
    if user is not None:
        refusal = await throttle.account_refusal(user.id)
        if refusal is not None:
            raise _too_many(refusal)
    # argon2 takes tens of milliseconds: a worker thread, not the event loop.
    signed_in = await run_in_threadpool(_verify_and_start, db, user, password, remember, address, user_agent)
    if signed_in is None:
        await throttle.record_failure(key, address, user.id if user is not None else None)
        raise auth_error(401, AuthCode.INVALID_USERNAME_OR_PASSWORD)
    return signed_in
