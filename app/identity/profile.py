"""A signed-in user changing their own profile (/api/auth/update-user): name, image, display username,
and the username itself as far as TIDINGS_AUTH_USERNAME_CHANGE allows; never the e-mail address."""

from __future__ import annotations

from enum import Enum
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.identity.accounts import username_owner_id, username_problem
from app.identity.auth_errors import AuthCode, auth_error
from app.models import User


class Unset(Enum):
    """A field the request did not mention (as opposed to one set to null)."""

    UNSET = "unset"


UNSET = Unset.UNSET


def may_change_username(user: User, policy: str) -> bool:
    """TIDINGS_AUTH_USERNAME_CHANGE: `never`, `non_staff` (staff keep theirs) or `always`."""
    return policy == "always" or (policy == "non_staff" and not user.is_staff)


def update_profile(
    db: Session,
    user: User,
    *,
    policy: str,
    name: str | Unset = UNSET,
    image: str | Unset | None = UNSET,
    username: str | Unset = UNSET,
    display_username: str | Unset = UNSET,
    email: Any = UNSET,
) -> None:
    """Checks in better-auth's order: the username (form, then policy, then taken), then the e-mail,
    then that something is left to change."""
    if not isinstance(username, Unset):
        problem = username_problem(username)
        if problem is not None:
            raise auth_error(400, AuthCode(problem.value))
        changes_username = user.username != username.lower()
        # Like better-auth's immutableUsername, a user without a username may still choose one.
        if changes_username and user.username is not None and not may_change_username(user, policy):
            raise auth_error(400, AuthCode.USERNAME_IS_IMMUTABLE)
        owner = username_owner_id(db, username)
        if owner is not None and owner != user.id:
            raise auth_error(400, AuthCode.USERNAME_IS_ALREADY_TAKEN)
    if not isinstance(email, Unset) and email:
        raise auth_error(400, AuthCode.EMAIL_CAN_NOT_BE_UPDATED)
    given = [value for value in (name, image, username, display_username) if not isinstance(value, Unset)]
    if not given:
        raise auth_error(400, AuthCode.NO_FIELDS_TO_UPDATE)

    if not isinstance(name, Unset):
        user.name = name
    if not isinstance(image, Unset):
        user.image = image
    if not isinstance(username, Unset):
        user.username = username.lower()
        user.display_username = username if isinstance(display_username, Unset) else display_username
    elif not isinstance(display_username, Unset):
        user.display_username = display_username
    try:
        with db.begin_nested():
            db.flush()
    except IntegrityError as exc:
        # Taken by another request between the check and the write.
        raise auth_error(400, AuthCode.USERNAME_IS_ALREADY_TAKEN) from exc
