"""/api/auth request bodies, read as better-auth reads them. The request models are the bodies: documented
from them and validated with them (app/authroutes/body.py words the errors as better-auth does)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from app.identity.accounts import USERNAME_MAX_LENGTH, USERNAME_MIN_LENGTH
from app.identity.passwords import MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH

# Size caps of the profile fields (better-auth sets none; they fit the columns): name, email and
# display username, and the image URL.
TEXT_MAX_LENGTH = 191
# better-auth's default username validator, as app/identity/accounts.py applies it.
USERNAME_CHARACTERS = "^[a-zA-Z0-9_.]+$"
IMAGE_MAX_LENGTH = 2048


def _no_nul(value: str | None) -> str | None:
    # PostgreSQL stores no NUL in text; such a value is never meant. Usernames are checked by their own
    # rules first and passwords only hashed, so those two fields go without this check.
    if value is not None and "\x00" in value:
        raise PydanticCustomError("nul_character", "Invalid input: must not contain NUL characters")
    return value


def _not_null(expected: str) -> BeforeValidator:
    """For a field that may be left out (None when it is) but not sent as null."""

    def check(value: Any) -> Any:
        if value is None:
            raise PydanticCustomError(
                "not_null", "Invalid input: expected {expected}, received null", {"expected": expected}
            )
        return value

    return BeforeValidator(check)


Stored = AfterValidator(_no_nul)
OptionalText = Annotated[str | SkipJsonSchema[None], _not_null("string")]
OptionalFlag = Annotated[bool | SkipJsonSchema[None], _not_null("boolean")]


class AuthBody(BaseModel):
    """A request body, read as better-auth's zod schemas read it: types as sent (no coercion), camelCase
    keys only, other keys ignored. An optional field may be left out but not sent as null unless its
    type says so (`default=None` fills in what was left out). app/authroutes/body.py words the errors."""

    model_config = ConfigDict(alias_generator=to_camel, strict=True)


class UsernameBody(AuthBody):
    username: str


class SignUpEmailBody(AuthBody):
    name: Annotated[str, Field(min_length=1, max_length=TEXT_MAX_LENGTH), Stored]
    email: Annotated[str, Field(max_length=TEXT_MAX_LENGTH, json_schema_extra={"format": "email"}), Stored]
    # The password and username rules answer in their own codes (PASSWORD_TOO_SHORT, USERNAME_TOO_LONG,
    # ...) from the sign-up service: documented here, applied there.
    password: str = Field(
        json_schema_extra={"minLength": MIN_PASSWORD_LENGTH, "maxLength": MAX_PASSWORD_LENGTH}
    )
    username: OptionalText = Field(
        default=None,
        json_schema_extra={
            "minLength": USERNAME_MIN_LENGTH,
            "maxLength": USERNAME_MAX_LENGTH,
            "pattern": USERNAME_CHARACTERS,
        },
    )
    display_username: Annotated[OptionalText, Field(max_length=TEXT_MAX_LENGTH), Stored] = None
    image: Annotated[str | None, Field(max_length=IMAGE_MAX_LENGTH), Stored] = None
    callback_url: Annotated[OptionalText, Stored] = Field(default=None, alias="callbackURL")
    remember_me: OptionalFlag = None


class SignInUsernameBody(AuthBody):
    username: str
    password: str
    remember_me: OptionalFlag = Field(
        default=None, description="false: a cookie for this browser session only"
    )
    callback_url: Annotated[OptionalText, Stored] = Field(
        default=None, alias="callbackURL", description="A path or a URL of this service to go to after"
    )


class UpdateUserBody(AuthBody):
    name: Annotated[OptionalText, Field(min_length=1, max_length=TEXT_MAX_LENGTH), Stored] = None
    image: Annotated[str | None, Field(max_length=IMAGE_MAX_LENGTH), Stored] = None
    username: OptionalText = Field(
        default=None,
        description="Changed only as TIDINGS_AUTH_USERNAME_CHANGE allows (`never` by default)",
    )
    display_username: Annotated[OptionalText, Field(max_length=TEXT_MAX_LENGTH), Stored] = None
