"""/api/auth answers in better-auth's JSON: camelCase keys, ids as strings (better-auth's numeric-id mode),
timestamps as JavaScript writes them; and the builders that fill them from rows. The request bodies are
app/authroutes/specs.py."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema

from app.identity.sessions import SignedIn
from app.kit.time import iso_millis
from app.models import User


class CamelModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class UserOut(CamelModel):
    id: str
    email: str
    email_verified: bool
    name: str
    image: str | None
    created_at: str = Field(description="ISO 8601, UTC, milliseconds")
    updated_at: str
    username: str | None
    display_username: str | None


class SessionOut(CamelModel):
    id: str
    token: str
    user_id: str
    expires_at: str
    created_at: str
    updated_at: str
    ip_address: str | None
    user_agent: str | None


class SessionWithUser(BaseModel):
    session: SessionOut
    user: UserOut


class UsernameAvailability(BaseModel):
    available: bool


class SignUpOut(BaseModel):
    token: str | None
    user: UserOut


class SignInOut(BaseModel):
    redirect: bool = Field(description="True when a callbackURL was given; it is also in `Location`")
    token: str
    url: str | SkipJsonSchema[None] = Field(
        default=None, description="The callbackURL; absent when none was given"
    )
    user: UserOut


class StatusOut(BaseModel):
    status: bool


class SignOutOut(BaseModel):
    success: bool


class AuthErrorOut(BaseModel):
    code: str
    message: str


def user_wire(user: User) -> UserOut:
    return UserOut(
        id=str(user.id),
        email=user.email,
        email_verified=user.email_verified,
        name=user.name,
        image=user.image,
        created_at=iso_millis(user.created_at),
        updated_at=iso_millis(user.updated_at),
        username=user.username,
        display_username=user.display_username,
    )


def session_wire(signed_in: SignedIn) -> SessionOut:
    session = signed_in.session
    return SessionOut(
        id=str(session.id),
        token=signed_in.token,
        user_id=str(session.user_id),
        expires_at=iso_millis(session.expires_at),
        created_at=iso_millis(session.created_at),
        updated_at=iso_millis(session.updated_at),
        ip_address=session.ip_address,
        user_agent=session.user_agent,
    )
