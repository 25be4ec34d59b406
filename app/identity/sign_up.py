"""Self-service sign-up by e-mail and password (/api/auth/sign-up/email), with better-auth's checks in
better-auth's order: username, e-mail, password, then an e-mail already in use."""

from __future__ import annotations

from dataclasses import dataclass

from email_validator import EmailNotValidError, validate_email
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.identity.accounts import create_user, find_user_by_email, username_owner_id, username_problem
from app.identity.auth_errors import AuthCode, auth_error
from app.identity.passwords import password_problem
from app.identity.sessions import SignedIn, start_session
from app.models import User


@dataclass(frozen=True)
class SignUpRequest:
    email: str
    password: str
    name: str
    username: str | None = None
    display_username: str | None = None
    image: str | None = None
    # The operator's TIDINGS_SIGNUP_PLAN.
    plan: str = "free"


def check_new_username(db: Session, username: str) -> str:
    problem = username_problem(username)
    if problem is not None:
        raise auth_error(400, AuthCode(problem.value))
    if username_owner_id(db, username) is not None:
        raise auth_error(400, AuthCode.USERNAME_IS_ALREADY_TAKEN)
    return username


def sign_up(db: Session, request: SignUpRequest) -> User:
    username = request.username
    # better-auth's username plugin: a valid displayUsername stands in for a missing username.
    display = request.display_username
    if username is None and display is not None and username_problem(display) is None:
        username = display
    if username is not None:
        check_new_username(db, username)
    try:
        email = validate_email(request.email.strip(), check_deliverability=False).normalized
    except EmailNotValidError as exc:
        raise auth_error(400, AuthCode.INVALID_EMAIL) from exc
    problem = password_problem(request.password)
    if problem is not None:
        raise auth_error(400, AuthCode(problem.value))
    if find_user_by_email(db, email) is not None:
        raise auth_error(422, AuthCode.USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL)
    try:
        with db.begin_nested():
            return create_user(
                db,
                email=email,
                name=request.name,
                username=username,
                display_username=request.display_username or username,
                password=request.password,
                plan=request.plan,
                image=request.image,
            )
    except IntegrityError as exc:
        # Another sign-up took the e-mail or the username between the checks and the insert.
        if find_user_by_email(db, email) is not None:
            raise auth_error(422, AuthCode.USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL) from exc
        raise auth_error(400, AuthCode.USERNAME_IS_ALREADY_TAKEN) from exc


def username_available(db: Session, username: str) -> bool:
    """/api/auth/is-username-available: a malformed name is 422 with better-auth's code, not an answer."""
    if not username:
        raise auth_error(422, AuthCode.INVALID_USERNAME)
    problem = username_problem(username)
    if problem is not None:
        raise auth_error(422, AuthCode(problem.value))
    return username_owner_id(db, username) is None


def sign_up_and_sign_in(
    db: Session, request: SignUpRequest, *, remember: bool, address: str, user_agent: str | None
) -> SignedIn:
    """better-auth's autoSignIn: the new user leaves sign-up with a session."""
    user = sign_up(db, request)
    return start_session(db, user, remember=remember, ip_address=address, user_agent=user_agent)
