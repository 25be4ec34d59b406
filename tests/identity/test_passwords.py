"""The password hash's timing equaliser: an unknown user's login verifies against a fixed hash, which
must cost what verifying a real one does."""

from __future__ import annotations

from app.identity import passwords


def test_the_unknown_users_hash_has_the_hashers_parameters() -> None:
    # A literal (made once by the hasher): if pwdlib's argon2 parameters change, it must be made again,
    # or a miss would cost another time than a wrong password.
    [hasher] = passwords._hasher.hashers
    assert not hasher.check_needs_rehash(passwords._DUMMY_HASH)
    assert passwords._hasher.verify("tidings-timing-equaliser", passwords._DUMMY_HASH)


def test_an_unknown_user_never_verifies() -> None:
    assert passwords.verify_password("tidings-timing-equaliser", None) is False
    assert passwords.verify_password("secret-123", passwords.hash_password("secret-123"))
