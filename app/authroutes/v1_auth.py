"""/v1/auth: signup, login, logout, me, personal access tokens, and the command-line device session.

Login and signup set the session cookie `tidings.session_token` (the one /api/auth sets) and answer
`{"user": AuthUser}`; they reuse /api/auth's services, the sign-in throttle and the Origin guard.
Errors are /v1's `{"error", "detail"}`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import BackgroundTasks, Depends, Header, Path, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field
from starlette.background import BackgroundTask

from app.app_state import SettingsDep, app_state
from app.authroutes.pages import DEVICE_PATH
from app.identity.auth_errors import AuthCode
from app.identity.cli_logins import TokenPair, issue_pair, refresh_pair, revoke_login
from app.identity.dependencies import V1User, bearer_token
from app.identity.device_sessions import (
    complete_device_session,
    poll_device_session,
    poll_session_by_id,
    start_device_session,
)
from app.identity.origin_guard import check_cookie_origin, check_sign_in_origin
from app.identity.session_cookie import clear_session_cookie, session_token, set_session_cookie
from app.identity.sessions import end_session
from app.identity.sign_in import sign_in_with_password
from app.identity.sign_up import SignUpRequest, sign_up_and_sign_in
from app.identity.token_lookup import forget_accounts
from app.identity.tokens import create_token_for, live_personal_tokens, revoke_personal_token
from app.kit.client import client_address
from app.kit.errors import DomainError, NotFound
from app.kit.openapi import request_body
from app.kit.time import utcnow
from app.kit.v1_input import invalid, validate
from app.kit.v1_request import JsonBody, read_json, read_v1_body
from app.kit.v1_routing import V1Router
from app.kit.v1_wire import ErrorOut
from app.models import PersonalToken, User
from app.request_sessions import SessionDep, side_transaction

router = V1Router(prefix="/v1/auth", tags=["Auth"], dependencies=[Depends(check_cookie_origin)])


class AuthUser(BaseModel):
    # Ids are strings on /v1 (openmagpie's schema says so for every resource, as FeedWire.user_id is, and
    # openmagpie's clients parse them as strings), though users and accounts are numbered.
    id: str
    email: str
    account_id: str
    created_at: datetime


class UserOut(BaseModel):
    user: AuthUser


class LoggedOut(BaseModel):
    detail: str = "logged out"


class Credentials(BaseModel):
    model_config = ConfigDict(extra="ignore")
    email: str | None = Field(default=None, max_length=191)
    username: str | None = Field(default=None, max_length=191)
    password: str = Field(max_length=1024)


class SignupInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    email: str = Field(max_length=191)
    password: str = Field(max_length=1024)
    name: str | None = Field(default=None, max_length=191)
    username: str | None = Field(default=None, max_length=191)


class TokenInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(default="", max_length=191)


class TokenOut(BaseModel):
    id: int
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None


class NewTokenOut(TokenOut):
    token: str = Field(description="The token itself: shown this once, never again")


class TokenListOut(BaseModel):
    items: list[TokenOut]


class CliTokenInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(default="", max_length=191)
    expires_in_days: int | None = None


class CliTokenOut(BaseModel):
    """A personal access token as openmagpie's `/v1/auth/cli-tokens` shows one."""

    id: str
    name: str
    # The last four of the characters Tidings keeps of a token (`prefix`): enough to tell tokens apart.
    last_four: str
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None = None


class NewCliTokenOut(CliTokenOut):
    token: str = Field(description="The token itself: shown this once, never again")


class DeviceSessionOut(BaseModel):
    device_code: str
    user_code: str
    verification_uri: str
    expires_in: int
    interval: int
    # openmagpie's names: its command line polls GET /device-sessions/{session_id} with the header
    # X-Device-Secret (the device code) and opens authorize_url (the page, with the code filled in).
    session_id: str
    authorize_url: str
    device_secret: str


class DeviceSessionPollOut(BaseModel):
    """`pending`, `expired`, or `completed` with the login's token pair (openmagpie's TokenPair)."""

    status: str
    access_token: str | None = None
    refresh_token: str | None = None
    expires_in: int | None = None
    token_type: str | None = None
    user: AuthUser | None = None


class RefreshInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    refresh_token: str = Field(min_length=1, max_length=256)


class TokenPairOut(BaseModel):
    access_token: str
    refresh_token: str
    expires_in: int
    token_type: str = "Bearer"
    user: AuthUser


class RevokedOut(BaseModel):
    revoked: bool


class DeviceCompleteInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    approve: bool = True


class DeviceCompleteOut(BaseModel):
    status: str


class DevicePollInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    device_code: str = Field(min_length=1, max_length=256)


class DeviceTokenOut(BaseModel):
    access_token: str
    token_type: str = "bearer"
    user: AuthUser


def auth_user_wire(user: User) -> AuthUser:
    return AuthUser(
        id=str(user.id), email=user.email, account_id=str(user.account_id), created_at=user.created_at
    )


def token_wire(token: PersonalToken) -> TokenOut:
    return TokenOut(
        id=token.id,
        name=token.name,
        prefix=token.prefix,
        created_at=token.created_at,
        last_used_at=token.last_used_at,
    )


def cli_token_wire(token: PersonalToken) -> CliTokenOut:
    return CliTokenOut(
        id=str(token.id),
        name=token.name,
        last_four=token.prefix[-4:],
        created_at=token.created_at,
        last_used_at=token.last_used_at,
    )


def errors(*pairs: tuple[int, str]) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": ErrorOut, "description": text} for status, text in pairs}


BAD_INPUT = (400, "validation_error: the body, each invalid field named")
NO_CREDENTIALS = (401, "not_authenticated")
# The routes that need no credentials (docs/compatibility.md) say so in the document.
NO_CREDENTIALS_NEEDED: dict[str, Any] = {"security": []}


def v1_error(exc: DomainError) -> DomainError:
    """/api/auth's better-auth codes as /v1 errors."""
    code = exc.code or ""
    if code == AuthCode.INVALID_USERNAME_OR_PASSWORD:
        return DomainError(
            401, "The e-mail (or username) or password is incorrect.", code="invalid_credentials"
        )
    if code == AuthCode.USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL:
        return DomainError(409, "An account with this e-mail already exists.", code="email_taken")
    if code == AuthCode.USERNAME_IS_ALREADY_TAKEN:
        return DomainError(409, "This username is already taken.", code="username_taken")
    if code == AuthCode.TOO_MANY_REQUESTS:
        return DomainError(
            429, "Too many failed logins; try again later.", code="rate_limited", headers=exc.headers
        )
    if exc.status == 400 or exc.status == 422:
        field = "password" if "PASSWORD" in code else "email" if "EMAIL" in code else "username"
        return invalid({field: [exc.message]})
    return exc


@router.post(
    "/signup",
    openapi_extra={**request_body(SignupInput), **NO_CREDENTIALS_NEEDED},
    operation_id="signup",
    status_code=201,
    response_model=UserOut,
    summary="Create a user and its account, signed in by the session cookie (403 while sign-up is closed)",
    dependencies=[Depends(check_sign_in_origin)],
    responses=errors(BAD_INPUT, (403, "signup_disabled"), (409, "email_taken or username_taken")),
)
async def signup(
    request: Request, response: Response, body: JsonBody, db: SessionDep, settings: SettingsDep
) -> UserOut:
    if not settings.auth_signup_enabled:
        raise DomainError(
            403,
            "Sign-up is closed on this server (TIDINGS_AUTH_SIGNUP_ENABLED=true opens it).",
            code="signup_disabled",
        )
    data = validate(SignupInput, body)
    new_user = SignUpRequest(
        email=data.email,
        password=data.password,
        name=data.name or data.email.split("@")[0][:191] or data.email,
        username=data.username,
        plan=settings.signup_plan,
    )
    try:
        signed_in = await run_in_threadpool(
            lambda: sign_up_and_sign_in(
                db,
                new_user,
                remember=True,
                address=client_address(request),
                user_agent=request.headers.get("user-agent"),
            )
        )
    except DomainError as exc:
        raise v1_error(exc) from exc
    set_session_cookie(response, signed_in.token, settings, remember=True)
    return UserOut(user=auth_user_wire(signed_in.user))


@router.post(
    "/login",
    openapi_extra={**request_body(Credentials), **NO_CREDENTIALS_NEEDED},
    operation_id="login",
    response_model=UserOut,
    summary="Sign in by e-mail (or username) and password; sets the session cookie tidings.session_token",
    dependencies=[Depends(check_sign_in_origin)],
    responses=errors(BAD_INPUT, (401, "invalid_credentials"), (429, "rate_limited; see Retry-After")),
)
async def login(
    request: Request, response: Response, body: JsonBody, db: SessionDep, settings: SettingsDep
) -> UserOut:
    data = validate(Credentials, body)
    if (data.email is None) == (data.username is None):
        raise invalid({"email": ["Give either `email` or `username`."]})
    identifier = data.email if data.email is not None else (data.username or "")
    try:
        signed_in = await sign_in_with_password(
            db,
            app_state(request).sign_in_throttle,
            username=identifier,
            password=data.password,
            address=client_address(request),
            user_agent=request.headers.get("user-agent"),
            by_email=data.email is not None,
        )
    except DomainError as exc:
        raise v1_error(exc) from exc
    set_session_cookie(response, signed_in.token, settings, remember=True)
    response.headers["Cache-Control"] = "no-store"
    return UserOut(user=auth_user_wire(signed_in.user))


@router.post(
    "/logout",
    operation_id="logout",
    response_model=LoggedOut,
    summary="End the cookie's session and clear the cookie",
    responses=errors(NO_CREDENTIALS),
)
def logout(
    request: Request, response: Response, _user: V1User, db: SessionDep, settings: SettingsDep
) -> LoggedOut:
    token = session_token(request, settings)
    if token is not None:
        end_session(db, token)
    clear_session_cookie(response, settings)
    return LoggedOut()


@router.get(
    "/me", operation_id="me", response_model=AuthUser, summary="The caller", responses=errors(NO_CREDENTIALS)
)
def me(user: V1User) -> AuthUser:
    return AuthUser(
        id=str(user.user.id),
        email=user.user.email,
        account_id=str(user.user.account_id),
        created_at=user.user.created_at,
    )


@router.get(
    "/tokens",
    operation_id="listTokens",
    response_model=TokenListOut,
    summary="The caller's live personal access tokens, newest first",
    responses=errors(NO_CREDENTIALS),
)
def list_tokens(user: V1User, db: SessionDep) -> TokenListOut:
    return TokenListOut(items=[token_wire(token) for token in live_personal_tokens(db, user.user.id)])


@router.post(
    "/tokens",
    openapi_extra=request_body(TokenInput),
    operation_id="createToken",
    status_code=201,
    response_model=NewTokenOut,
    summary="Make a personal access token; the token is in this answer only",
    responses=errors(BAD_INPUT, NO_CREDENTIALS),
)
def create_token(user: V1User, body: JsonBody, db: SessionDep) -> NewTokenOut:
    data = validate(TokenInput, body)
    row, token = create_token_for(db, user.user.id, data.name)
    return NewTokenOut(**token_wire(row).model_dump(), token=token)


TokenId = Annotated[int, Path(ge=1, le=2**62)]


@router.delete(
    "/tokens/{token_id}",
    operation_id="revokeToken",
    status_code=204,
    summary="Revoke one of the caller's tokens; it stops working at once",
    responses=errors(NO_CREDENTIALS, (404, "not_found")),
)
def revoke_token(request: Request, token_id: TokenId, user: V1User, db: SessionDep) -> Response:
    if revoke_personal_token(db, user.user.id, token_id) is None:
        raise NotFound("No such token.")
    # Forget it now, and again once the revocation is committed, as the account tokens page does.
    lookup = app_state(request).token_lookup
    lookup.forget_account(user.user.account_id)
    return Response(
        status_code=204, background=BackgroundTask(forget_accounts, lookup, [user.user.account_id])
    )


# openmagpie's names for the same tokens (its `magpie auth token create|list|revoke`).


@router.get(
    "/cli-tokens",
    operation_id="listCliTokens",
    response_model=list[CliTokenOut],
    summary="The caller's live personal access tokens, newest first, as a bare array (openmagpie's form)",
    responses=errors(NO_CREDENTIALS),
)
def list_cli_tokens(user: V1User, db: SessionDep) -> list[CliTokenOut]:
    return [cli_token_wire(token) for token in live_personal_tokens(db, user.user.id)]


@router.post(
    "/cli-tokens",
    openapi_extra=request_body(CliTokenInput),
    operation_id="createCliToken",
    status_code=201,
    response_model=NewCliTokenOut,
    summary="Make a personal access token (openmagpie's form); the token is in this answer only",
    description="Tidings' tokens do not expire (they are revoked): `expires_in_days` is refused.",
    responses=errors(BAD_INPUT, NO_CREDENTIALS),
)
def create_cli_token(user: V1User, body: JsonBody, db: SessionDep) -> NewCliTokenOut:
    data = validate(CliTokenInput, body)
    if data.expires_in_days is not None:
        raise invalid({"expires_in_days": ["Tokens do not expire here: revoke one when it is done with."]})
    row, token = create_token_for(db, user.user.id, data.name)
    return NewCliTokenOut(**cli_token_wire(row).model_dump(), token=token)


@router.delete(
    "/cli-tokens/{token_id}",
    operation_id="revokeCliToken",
    status_code=204,
    summary="Revoke one of the caller's tokens (openmagpie's form); it stops working at once",
    responses=errors(NO_CREDENTIALS, (404, "not_found")),
)
def revoke_cli_token(request: Request, token_id: TokenId, user: V1User, db: SessionDep) -> Response:
    return revoke_token(request, token_id, user, db)


@router.post(
    "/device-sessions",
    openapi_extra=NO_CREDENTIALS_NEEDED,
    operation_id="startDeviceSession",
    status_code=201,
    response_model=DeviceSessionOut,
    summary="Start a command-line sign-in: show user_code, poll with device_code (no credentials)",
)
def start_device(db: SessionDep, settings: SettingsDep) -> DeviceSessionOut:
    started = start_device_session(db)
    base = settings.base_url.rstrip("/")
    return DeviceSessionOut(
        device_code=started.device_code,
        user_code=started.user_code,
        # The page where a person signed in on this service types the code (/account/device).
        verification_uri=f"{base}{DEVICE_PATH}",
        expires_in=started.expires_in,
        interval=started.interval,
        session_id=str(started.session_id),
        authorize_url=f"{base}{DEVICE_PATH}?{urlencode({'user_code': started.user_code})}",
        device_secret=started.device_code,
    )


def token_pair_wire(pair: TokenPair) -> TokenPairOut:
    return TokenPairOut(
        access_token=pair.access_token,
        refresh_token=pair.refresh_token,
        expires_in=pair.expires_in,
        user=auth_user_wire(pair.user),
    )


@router.get(
    "/device-sessions/{session_id}",
    openapi_extra=NO_CREDENTIALS_NEEDED,
    operation_id="pollDeviceSessionById",
    response_model=DeviceSessionPollOut,
    summary="Poll a device session by its id with the header X-Device-Secret (openmagpie's form)",
    description="`pending`, `expired`, or once approved `completed` with an access token (an hour), a "
    "refresh token (30 days, for POST /v1/auth/tokens/refresh) and the user; issued once.",
    responses=errors((403, "access_denied: the user refused"), (404, "not_found, a wrong secret or used")),
)
def poll_device_by_id(
    session_id: Annotated[str, Path(max_length=64)],
    db: SessionDep,
    device_secret: Annotated[str, Header(alias="X-Device-Secret", max_length=256)] = "",
) -> DeviceSessionPollOut:
    now = utcnow()
    polled = poll_session_by_id(db, session_id, device_secret, now)
    if polled.user is None:
        return DeviceSessionPollOut(status=polled.status)
    pair = token_pair_wire(issue_pair(db, polled.user, now))
    return DeviceSessionPollOut(status=polled.status, **pair.model_dump())


@router.post(
    "/tokens/refresh",
    openapi_extra={**request_body(RefreshInput), **NO_CREDENTIALS_NEEDED},
    operation_id="refreshTokens",
    response_model=TokenPairOut,
    summary="A new token pair for a command-line login's refresh token; the old pair stops working",
    responses=errors(BAD_INPUT, (401, "invalid_grant: unknown, used or expired")),
)
def refresh_tokens(request: Request, body: JsonBody, later: BackgroundTasks) -> TokenPairOut:
    data = validate(RefreshInput, body)
    # A refresh token used again ends the user's command-line logins, and that stands despite the 401.
    with side_transaction(request, commit_despite=(DomainError,)) as db:
        pair = refresh_pair(db, data.refresh_token, utcnow())
        answer, account_id = token_pair_wire(pair), pair.user.account_id
    forget_at_once(request, account_id, later)
    return answer


def forget_at_once(request: Request, account_id: int, later: BackgroundTasks) -> None:
    """A revoked token stops working at once: forgotten now, and again once the revocation is
    committed, as a personal token's revoke does."""
    lookup = app_state(request).token_lookup
    lookup.forget_account(account_id)
    later.add_task(forget_accounts, lookup, [account_id])


@router.post(
    "/tokens/revoke",
    openapi_extra=NO_CREDENTIALS_NEEDED,
    operation_id="revokeLogin",
    response_model=RevokedOut,
    summary="End the command-line login of the bearer access token (a personal token is never revoked here)",
    description="Always 200: `revoked` says whether a login ended. A personal access token (`tdg_`) "
    "stays valid: it is revoked only by DELETE /v1/auth/cli-tokens/{id} or /v1/auth/tokens/{id}.",
)
def revoke_login_route(request: Request, db: SessionDep, later: BackgroundTasks) -> RevokedOut:
    account_id = revoke_login(db, bearer_token(request), utcnow())
    if account_id is not None:
        forget_at_once(request, account_id, later)
    return RevokedOut(revoked=account_id is not None)


@router.post(
    "/device-sessions/token",
    openapi_extra={**request_body(DevicePollInput), **NO_CREDENTIALS_NEEDED},
    operation_id="pollDeviceSession",
    response_model=DeviceTokenOut,
    summary="Poll with the device code: the token (once) and the AuthUser when approved",
    responses=errors(
        (
            400,
            "authorization_pending, slow_down, expired_token, access_denied, invalid_grant, validation_error",
        )
    ),
)
def poll_device(request: Request, body: JsonBody) -> DeviceTokenOut:
    data = validate(DevicePollInput, body)
    # The poll is recorded (its time, a raised interval) even when the answer is an error.
    with side_transaction(request, commit_despite=(DomainError,)) as db:
        token, user = poll_device_session(db, data.device_code)
    return DeviceTokenOut(access_token=token, user=auth_user_wire(user))


@router.post(
    "/device-sessions/{user_code}/complete",
    operation_id="completeDeviceSession",
    response_model=DeviceCompleteOut,
    summary="Approve (or with approve=false deny) the command line showing this user code",
    responses=errors(
        BAD_INPUT, NO_CREDENTIALS, (404, "not_found"), (409, "already_completed"), (400, "expired_token")
    ),
    openapi_extra=request_body(DeviceCompleteInput, required=False),
)
async def complete_device(
    request: Request, user_code: Annotated[str, Path(max_length=64)], user: V1User, db: SessionDep
) -> DeviceCompleteOut:
    raw = await read_v1_body(request)
    approve = True
    if raw.strip():
        approve = validate(DeviceCompleteInput, await read_json(request)).approve
    await run_in_threadpool(complete_device_session, db, user_code, user.user.id, approve=approve)
    return DeviceCompleteOut(status="approved" if approve else "denied")
