"""better-auth's error codes and messages (core and `username` plugin), as DomainErrors. /api/auth renders
them as `{"code", "message"}`; the codes are part of better-auth's interface, so they are spelled as
better-auth's."""

from __future__ import annotations

from enum import StrEnum

from app.kit.errors import DomainError


class AuthCode(StrEnum):
    # username plugin
    INVALID_USERNAME_OR_PASSWORD = "INVALID_USERNAME_OR_PASSWORD"
    USERNAME_IS_ALREADY_TAKEN = "USERNAME_IS_ALREADY_TAKEN"
    USERNAME_TOO_SHORT = "USERNAME_TOO_SHORT"
    USERNAME_TOO_LONG = "USERNAME_TOO_LONG"
    INVALID_USERNAME = "INVALID_USERNAME"
    USERNAME_IS_IMMUTABLE = "USERNAME_IS_IMMUTABLE"
    # core
    EMAIL_PASSWORD_SIGN_UP_DISABLED = "EMAIL_PASSWORD_SIGN_UP_DISABLED"
    INVALID_EMAIL = "INVALID_EMAIL"
    INVALID_PASSWORD = "INVALID_PASSWORD"
    PASSWORD_TOO_SHORT = "PASSWORD_TOO_SHORT"
    PASSWORD_TOO_LONG = "PASSWORD_TOO_LONG"
    USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL = "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL"
    EMAIL_CAN_NOT_BE_UPDATED = "EMAIL_CAN_NOT_BE_UPDATED"
    BODY_MUST_BE_AN_OBJECT = "BODY_MUST_BE_AN_OBJECT"
    NO_FIELDS_TO_UPDATE = "NO_FIELDS_TO_UPDATE"
    INVALID_CALLBACK_URL = "INVALID_CALLBACK_URL"
    UNAUTHORIZED = "UNAUTHORIZED"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    BAD_REQUEST = "BAD_REQUEST"
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    # Tidings' own: better-auth caps no body.
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    TOO_MANY_REQUESTS = "TOO_MANY_REQUESTS"


MESSAGES: dict[AuthCode, str] = {
    AuthCode.INVALID_USERNAME_OR_PASSWORD: "Invalid username or password",
    AuthCode.USERNAME_IS_ALREADY_TAKEN: "Username is already taken. Please try another.",
    AuthCode.USERNAME_TOO_SHORT: "Username is too short",
    AuthCode.USERNAME_TOO_LONG: "Username is too long",
    AuthCode.INVALID_USERNAME: "Username is invalid",
    AuthCode.USERNAME_IS_IMMUTABLE: "Username cannot be updated",
    # better-auth's words, then the setting that opens sign-up, for the operator reading them.
    AuthCode.EMAIL_PASSWORD_SIGN_UP_DISABLED: (
        "Email and password sign up is not enabled (TIDINGS_AUTH_SIGNUP_ENABLED=true opens it)"
    ),
    AuthCode.INVALID_EMAIL: "Invalid email",
    AuthCode.INVALID_PASSWORD: "Invalid password",
    AuthCode.PASSWORD_TOO_SHORT: "Password too short",
    AuthCode.PASSWORD_TOO_LONG: "Password too long",
    AuthCode.USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL: "User already exists. Use another email.",
    AuthCode.EMAIL_CAN_NOT_BE_UPDATED: "Email can not be updated",
    AuthCode.BODY_MUST_BE_AN_OBJECT: "Body must be an object",
    # better-auth sends this one without a code.
    AuthCode.NO_FIELDS_TO_UPDATE: "No fields to update",
    AuthCode.INVALID_CALLBACK_URL: "Invalid callbackURL",
    AuthCode.UNAUTHORIZED: "Unauthorized",
    AuthCode.VALIDATION_ERROR: "Validation Error",
    AuthCode.BAD_REQUEST: "Bad Request",
    AuthCode.UNSUPPORTED_MEDIA_TYPE: "Unsupported media type",
    AuthCode.PAYLOAD_TOO_LARGE: "Payload too large",
    AuthCode.TOO_MANY_REQUESTS: "Too many requests. Please try again later.",
}


def auth_error(
    status: int, code: AuthCode, message: str | None = None, *, headers: dict[str, str] | None = None
) -> DomainError:
    return DomainError(status, message or MESSAGES[code], code=code.value, headers=headers)
