"""Password hashing with argon2id (pwdlib), and the password rules of sign-up (the CLI applies them too)."""

from __future__ import annotations

from enum import StrEnum

from pwdlib import PasswordHash
from pwdlib.hashers.argon2 import Argon2Hasher

# better-auth's emailAndPassword defaults.
MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 128


class PasswordProblem(StrEnum):
    """Why a password cannot be used; the values are better-auth's error codes."""

    EMPTY = "INVALID_PASSWORD"
    TOO_SHORT = "PASSWORD_TOO_SHORT"
    TOO_LONG = "PASSWORD_TOO_LONG"


def password_problem(password: str) -> PasswordProblem | None:
    """Checked in better-auth's order: present, then long enough, then not too long."""
    if not password:
        return PasswordProblem.EMPTY
    if len(password) < MIN_PASSWORD_LENGTH:
        return PasswordProblem.TOO_SHORT
    if len(password) > MAX_PASSWORD_LENGTH:
        return PasswordProblem.TOO_LONG
    return None


_hasher = PasswordHash((Argon2Hasher(),))
# Verified against when the user is unknown, so a miss costs the same time as a wrong password. A
# literal, made once by `_hasher.hash("tidings-timing-equaliser")`: hashing it at import cost every
# process (`tidings worker` included) about 0.3 s of CPU and 64 MB at start. The test of this module
# checks that it still has the hasher's parameters (a miss would otherwise cost another time).
_DUMMY_HASH = (
    "$argon2id$v=19$m=65536,t=3,p=4$nnAJcl7KnXQUAQAgNnN3Lg$XzCpPWZ5otMiXsitywnQcwxXu7w4AaaVof4UjznQkcU"
)


def hash_password(password: str) -> str:
    return str(_hasher.hash(password))


def verify_password(password: str, password_hash: str | None) -> bool:
    if password_hash is None:
        _hasher.verify(password, _DUMMY_HASH)
        return False
    return bool(_hasher.verify(password, password_hash))
