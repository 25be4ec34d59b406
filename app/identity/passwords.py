"""Password hashing with argon2id (pwdlib)."""

from __future__ import annotations

from pwdlib import PasswordHash
from pwdlib.hashers.argon2 import Argon2Hasher

_hasher = PasswordHash((Argon2Hasher(),))
# Verified against when the user is unknown, so a miss costs the same time as a wrong password.
_DUMMY_HASH = _hasher.hash("tidings-timing-equaliser")


def hash_password(password: str) -> str:
    return str(_hasher.hash(password))


def verify_password(password: str, password_hash: str | None) -> bool:
    if password_hash is None:
        _hasher.verify(password, _DUMMY_HASH)
        return False
    return bool(_hasher.verify(password, password_hash))
