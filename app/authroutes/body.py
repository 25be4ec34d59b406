"""Reading /api/auth request bodies as better-auth (better-call with zod) does: JSON only (forms too where
a route allows them), 415 for other media types, and 400 `VALIDATION_ERROR` naming each bad field the way
zod words it (`[body.username] Invalid input: expected string, received number`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import Request

from app.identity.auth_errors import AuthCode, auth_error

JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"


async def read_body(request: Request, *, form_allowed: bool = False) -> Any:
    """The parsed body: a JSON value, a dict of form fields, or None when there is no body."""
    raw = await request.body()
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


@dataclass(frozen=True)
class Field:
    name: str
    kind: type[str] | type[bool]
    required: bool = True
    nullable: bool = False
    min_length: int = 0
    max_length: int | None = None
    # Off for fields that are never stored as given (usernames are checked by their own rules first,
    # passwords only hashed).
    reject_nul: bool = True


def _problem(value: Any, spec: Field) -> str | None:
    expected = "string" if spec.kind is str else "boolean"
    if value is None and spec.nullable:
        return None
    if not isinstance(value, spec.kind):
        return f"Invalid input: expected {expected}, received {js_type(value)}"
    if isinstance(value, str):
        if len(value) < spec.min_length:
            return f"Too small: expected string to have >={spec.min_length} characters"
        if spec.max_length is not None and len(value) > spec.max_length:
            return f"Too big: expected string to have <={spec.max_length} characters"
        # PostgreSQL stores no NUL in text; such a value is never meant.
        if spec.reject_nul and "\x00" in value:
            return "Invalid input: must not contain NUL characters"
    return None


def validated(body: Any, fields: Sequence[Field]) -> dict[str, Any]:
    """The body as an object whose listed fields have their types; other keys are passed through."""
    if not isinstance(body, dict):
        received = "undefined" if body is None else js_type(body)
        raise auth_error(
            400, AuthCode.VALIDATION_ERROR, f"[body] Invalid input: expected object, received {received}"
        )
    issues = []
    for spec in fields:
        if spec.name not in body:
            if spec.required:
                expected = "string" if spec.kind is str else "boolean"
                issues.append(f"[body.{spec.name}] Invalid input: expected {expected}, received undefined")
            continue
        problem = _problem(body[spec.name], spec)
        if problem is not None:
            issues.append(f"[body.{spec.name}] {problem}")
    if issues:
        raise auth_error(400, AuthCode.VALIDATION_ERROR, "; ".join(issues))
    return body
