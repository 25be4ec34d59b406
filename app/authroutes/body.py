"""Reading /api/auth request bodies as better-auth (better-call with zod) does: JSON only (forms too where
a route allows them), 415 for other media types, and 400 `VALIDATION_ERROR` naming each bad field the way
zod words it (`[body.username] Invalid input: expected string, received number`); and, Tidings' own, 413
past MAX_BODY_BYTES, which caps the forms of the account pages and OAuth's routes too (`read_form`)."""

from __future__ import annotations

from typing import Any, TypeVar, get_args

import orjson
from fastapi import Request
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from starlette.datastructures import FormData

from app.identity.auth_errors import AuthCode, auth_error
from app.kit.body import BodyTooLarge, read_capped
from app.kit.errors import DomainError

JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"
BodyT = TypeVar("BodyT", bound=BaseModel)
# better-auth reads any size; these bodies are a handful of short fields (the longest, `image`, is 2,048
# characters), sent before sign-in: as the hosted sign-up form, 32 KiB (docs/compatibility.md).
MAX_BODY_BYTES = 32 * 1024


def _too_large() -> DomainError:
    return auth_error(
        413, AuthCode.PAYLOAD_TOO_LARGE, f"The request body is larger than {MAX_BODY_BYTES} bytes."
    )


async def read_body(request: Request, *, form_allowed: bool = False) -> Any:
    """The parsed body: a JSON value, a dict of form fields, or None when there is no body."""
    try:
        raw = await read_capped(request, MAX_BODY_BYTES)
    except BodyTooLarge as exc:
        raise _too_large() from exc
    if not raw:
        return None
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    allowed = [JSON_TYPE, FORM_TYPE] if form_allowed else [JSON_TYPE]
    if media_type not in allowed:
        message = (
            f'Content-Type "{request.headers.get("content-type", "")}" is not allowed'
            if media_type
            else "Content-Type is required"
        )
        raise auth_error(
            415, AuthCode.UNSUPPORTED_MEDIA_TYPE, f"{message}. Allowed types: {', '.join(allowed)}"
        )
    if media_type == FORM_TYPE:
        form = await request.form()
        return {key: value for key, value in form.items() if isinstance(value, str)}
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise auth_error(400, AuthCode.BAD_REQUEST, "Invalid JSON in request body") from exc


async def read_form(request: Request) -> FormData:
    """The form of an account page or of OAuth's routes, read within MAX_BODY_BYTES (413 past it)."""
    await read_capped(request, MAX_BODY_BYTES)
    return await request.form()


def js_type(value: Any) -> str:
    """The type name zod reports for a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _expected(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """The JSON type zod names for the field at `loc` (an alias): boolean or string."""
    for name, field in model.model_fields.items():
        if (field.alias or name) == loc[0]:
            return "boolean" if bool in (field.annotation, *get_args(field.annotation)) else "string"
    return "string"


def _issue(model: type[BaseModel], error: ErrorDetails) -> str:
    """One pydantic error in zod's words."""
    kind = error["type"]
    ctx = error.get("ctx", {})
    if kind == "missing":
        problem = f"Invalid input: expected {_expected(model, error['loc'])}, received undefined"
    elif kind == "string_too_short":
        problem = f"Too small: expected string to have >={ctx['min_length']} characters"
    elif kind == "string_too_long":
        problem = f"Too big: expected string to have <={ctx['max_length']} characters"
    elif kind in ("string_type", "bool_type"):
        expected = _expected(model, error["loc"])
        problem = f"Invalid input: expected {expected}, received {js_type(error['input'])}"
    else:  # the models' own checks (specs.py) word their messages as zod does
        problem = error["msg"]
    return f"[body.{error['loc'][0]}] {problem}"


def validated(body: Any, model: type[BodyT]) -> BodyT:
    """The body as `model` (app/authroutes/specs.py), else 400 VALIDATION_ERROR naming each bad field
    in the model's order; keys the model does not name are ignored."""
    if not isinstance(body, dict):
        received = "undefined" if body is None else js_type(body)
        raise auth_error(
            400, AuthCode.VALIDATION_ERROR, f"[body] Invalid input: expected object, received {received}"
        )
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        issues = [_issue(model, error) for error in exc.errors()]
        raise auth_error(400, AuthCode.VALIDATION_ERROR, "; ".join(issues)) from exc
