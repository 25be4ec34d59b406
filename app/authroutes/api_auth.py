"""/api/auth: the routes of better-auth (core and `username` plugin) that Tidings serves, answering as
better-auth does so that its client works unchanged. Every cookie-carrying POST passes the Origin guard."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from app.app_state import SettingsDep, app_state
from app.authroutes.body import read_body, validated
from app.authroutes.specs import SignInUsernameBody, SignUpEmailBody, UpdateUserBody, UsernameBody
from app.authroutes.wire import (
    AuthErrorOut,
    SessionWithUser,
    SignInOut,
    SignOutOut,
    SignUpOut,
    StatusOut,
    UsernameAvailability,
    session_wire,
    user_wire,
)
from app.identity.auth_errors import AuthCode, auth_error
from app.identity.dependencies import OptionalSessionUser, SessionUser
from app.identity.origin_guard import check_cookie_origin, check_sign_in_origin, is_trusted_url
from app.identity.profile import UNSET, update_profile
from app.identity.session_cookie import clear_session_cookie, session_token, set_session_cookie
from app.identity.sessions import end_session
from app.identity.sign_in import sign_in_with_password
from app.identity.sign_up import SignUpRequest, sign_up_and_sign_in, username_available
from app.kit.client import client_address
from app.kit.openapi import FORM, JSON, request_body
from app.request_sessions import SessionDep

# What any POST of the family may answer besides its own codes.
POST_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": AuthErrorOut, "description": description}
    for status, description in (
        (400, "VALIDATION_ERROR, or a rule of the route (see its codes)"),
        (403, "A cookie-carrying request without this service's Origin (INVALID_ORIGIN)"),
        (415, "UNSUPPORTED_MEDIA_TYPE"),
        (413, "PAYLOAD_TOO_LARGE: a body over 32 KiB"),
    )
}

router = APIRouter(prefix="/api/auth", tags=["Auth"], dependencies=[Depends(check_cookie_origin)])


async def json_body(request: Request) -> Any:
    return await read_body(request)


JsonBody = Annotated[Any, Depends(json_body)]


def error_response(status: int, description: str) -> dict[int | str, dict[str, Any]]:
    return {**POST_ERRORS, status: {"model": AuthErrorOut, "description": description}}


@router.post(
    "/is-username-available",
    operation_id="isUsernameAvailable",
    openapi_extra=request_body(UsernameBody),
    response_model=UsernameAvailability,
    summary="Whether a username is free (no session needed)",
    responses=error_response(422, "USERNAME_TOO_SHORT, USERNAME_TOO_LONG or INVALID_USERNAME"),
)
def is_username_available(body: JsonBody, db: SessionDep) -> UsernameAvailability:
    wanted = validated(body, UsernameBody)
    return UsernameAvailability(available=username_available(db, wanted.username))


@router.post(
    "/sign-up/email",
    operation_id="signUpWithEmailAndPassword",
    openapi_extra=request_body(SignUpEmailBody, media_types=(JSON, FORM)),
    response_model=SignUpOut,
    summary="Sign up with e-mail and password (400 EMAIL_PASSWORD_SIGN_UP_DISABLED while closed)",
    dependencies=[Depends(check_sign_in_origin)],
    responses=error_response(422, "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL"),
)
async def sign_up_email(
    request: Request, response: Response, db: SessionDep, settings: SettingsDep
) -> SignUpOut:
    # Before the body is read: a closed sign-up answers the same whatever is sent.
    if not settings.auth_signup_enabled:
        raise auth_error(400, AuthCode.EMAIL_PASSWORD_SIGN_UP_DISABLED)
    body = validated(await read_body(request, form_allowed=True), SignUpEmailBody)
    remember = body.remember_me is not False
    new_user = SignUpRequest(
        email=body.email,
        password=body.password,
        name=body.name,
        username=body.username,
        display_username=body.display_username,
        image=body.image,
        plan=settings.signup_plan,
    )
    signed_in = await run_in_threadpool(
        lambda: sign_up_and_sign_in(
            db,
            new_user,
            remember=remember,
            address=client_address(request),
            user_agent=request.headers.get("user-agent"),
        )
    )
    set_session_cookie(response, signed_in.token, settings, remember=remember)
    return SignUpOut(token=signed_in.token, user=user_wire(signed_in.user))


@router.post(
    "/sign-in/username",
    operation_id="signInUsername",
    openapi_extra=request_body(SignInUsernameBody),
    response_model=SignInOut,
    summary="Sign in with username and password; sets the session cookie tidings.session_token",
    responses={
        **POST_ERRORS,
        **error_response(401, "INVALID_USERNAME_OR_PASSWORD, whatever was wrong"),
        **error_response(403, "INVALID_CALLBACK_URL: a callbackURL off this service"),
        **error_response(429, "Too many failed sign-ins for this username or address; see Retry-After"),
    },
)
async def sign_in_username(
    request: Request, body: JsonBody, db: SessionDep, settings: SettingsDep
) -> Response:
    credentials = validated(body, SignInUsernameBody)
    callback_url = credentials.callback_url or None
    if callback_url is not None and not is_trusted_url(callback_url, settings, allow_relative=True):
        raise auth_error(403, AuthCode.INVALID_CALLBACK_URL)
    signed_in = await sign_in_with_password(
        db,
        app_state(request).sign_in_throttle,
        username=credentials.username,
        password=credentials.password,
        address=client_address(request),
        user_agent=request.headers.get("user-agent"),
        remember=credentials.remember_me is not False,
    )
    answer = SignInOut(
        redirect=callback_url is not None,
        token=signed_in.token,
        url=callback_url,
        user=user_wire(signed_in.user),
    )
    # A Response of its own: better-auth's `url: undefined` is no key at all in its JSON.
    absent = {"url"} if callback_url is None else set()
    reply = JSONResponse(answer.model_dump(mode="json", by_alias=True, exclude=absent))
    reply.headers.update({"Cache-Control": "no-store"})
    set_session_cookie(reply, signed_in.token, settings, remember=signed_in.session.remember)
    if callback_url is not None:
        reply.headers["Location"] = callback_url
    return reply


@router.post(
    "/update-user",
    operation_id="updateUser",
    openapi_extra=request_body(UpdateUserBody),
    response_model=StatusOut,
    summary="Change the signed-in user's name, image or username (session cookie required)",
    responses={
        **error_response(
            400,
            "USERNAME_IS_IMMUTABLE (TIDINGS_AUTH_USERNAME_CHANGE), USERNAME_IS_ALREADY_TAKEN, "
            "USERNAME_TOO_SHORT, USERNAME_TOO_LONG, INVALID_USERNAME, EMAIL_CAN_NOT_BE_UPDATED, "
            "NO_FIELDS_TO_UPDATE, VALIDATION_ERROR",
        ),
        **error_response(401, "UNAUTHORIZED: no valid session cookie"),
    },
)
def update_user(
    request: Request, signed_in: SessionUser, body: JsonBody, db: SessionDep, settings: SettingsDep
) -> StatusOut:
    changes = validated(body, UpdateUserBody)

    def sent(field: str) -> Any:
        # Left out is left alone; a field sent is never null but where its type says so (image).
        return getattr(changes, field) if field in changes.model_fields_set else UNSET

    update_profile(
        db,
        signed_in.user,
        policy=settings.auth_username_change,
        name=sent("name"),
        image=sent("image"),
        username=sent("username"),
        display_username=sent("display_username"),
        # Not a field of the body: better-auth refuses it by name, whatever its value.
        email=body.get("email", UNSET),
    )
    # Bearer-token principals carry the name: drop what this process remembers of the account.
    app_state(request).token_lookup.forget_account(signed_in.user.account_id)
    return StatusOut(status=True)


@router.get(
    "/get-session",
    operation_id="getSession",
    response_model=SessionWithUser | None,
    summary="The session of the cookie and its user, or null",
)
def get_session(response: Response, signed_in: OptionalSessionUser) -> SessionWithUser | None:
    response.headers["Cache-Control"] = "no-store"
    response.headers["Pragma"] = "no-cache"
    if signed_in is None:
        return None
    return SessionWithUser(session=session_wire(signed_in), user=user_wire(signed_in.user))


@router.post(
    "/sign-out",
    operation_id="signOut",
    response_model=SignOutOut,
    summary="End the cookie's session and clear the cookie",
)
def sign_out(request: Request, response: Response, db: SessionDep, settings: SettingsDep) -> SignOutOut:
    token = session_token(request, settings)
    if token is not None:
        end_session(db, token)
    clear_session_cookie(response, settings)
    return SignOutOut(success=True)
