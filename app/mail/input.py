"""Reading and validating email API input the way SendFox's Laravel back end does.

Public clients send parameters in a JSON body, a form body, or the query string (sendfox-js), so all
three are merged (body over query). Arrays and objects may use PHP's bracket syntax
(`lists[]=1`, `contact_fields[0][name]=x`). Strings are trimmed and empty strings become null
(Laravel's TrimStrings and ConvertEmptyStringsToNull). Validation failures become Laravel-style
messages keyed by dotted field paths (`contacts.0.email`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from email_validator import SPECIAL_USE_DOMAIN_NAMES, EmailNotValidError, validate_email
from pydantic import AfterValidator, BaseModel, BeforeValidator, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from app.kit.errors import ValidationFailed
from app.kit.json_types import JsonObject

ModelT = TypeVar("ModelT", bound=BaseModel)

_BRACKETS = re.compile(r"\[([^\[\]]*)\]")
# A list index in a bracket key: ASCII digits only (str.isdigit also takes '²', which int() refuses) and
# short enough for int() (which refuses more than 4300 digits).
_INDEX = re.compile(r"[0-9]{1,9}")
# Bracket nesting deeper than this is refused: a key like a[0][0][0]... must not cost memory or recursion.
MAX_NESTING = 8
# JSON nested deeper than this is refused (the deepest real input, contacts[].contact_fields[], is 4).
MAX_JSON_DEPTH = 32


@dataclass(frozen=True)
class RawInput:
    data: dict[str, Any]
    problem: str | None = None


def nest_pairs(pairs: list[tuple[str, str]]) -> JsonObject:
    """PHP-style keys into nested values: `a[]=1&a[]=2` is a list, `a[x][y]=1` a dict, `a=1&a=2` a list."""
    root: dict[str, Any] = {}
    for key, value in pairs:
        bracket_at = key.find("[")
        if bracket_at <= 0:
            _put(root, key, value, repeat_as_list=True)
            continue
        parts = [key[:bracket_at], *_BRACKETS.findall(key[bracket_at:])][:MAX_NESTING]
        node: dict[str, Any] = root
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if part == "":
                part = str(len(node))
            if last:
                _put(node, part, value, repeat_as_list=False)
            else:
                child = node.get(part)
                if not isinstance(child, dict):
                    child = {}
                    node[part] = child
                node = child
    # The top level stays an object even when every name is a number (`?0=a&1=b`).
    return {key: _lists_from_index_dicts(value) for key, value in root.items()}


def _put(node: dict[str, Any], key: str, value: str, *, repeat_as_list: bool) -> None:
    if repeat_as_list and key in node:
        existing = node[key]
        node[key] = [*existing, value] if isinstance(existing, list) else [existing, value]
    else:
        node[key] = value


def _lists_from_index_dicts(value: Any) -> Any:
    if isinstance(value, dict):
        converted = {k: _lists_from_index_dicts(v) for k, v in value.items()}
        if converted and all(_INDEX.fullmatch(k) for k in converted):
            return [converted[k] for k in sorted(converted, key=int)]
        return converted
    if isinstance(value, list):
        return [_lists_from_index_dicts(v) for v in value]
    return value


class TooDeep(ValueError):
    pass


def normalize(value: Any, depth: int = 0) -> Any:
    """Trim strings and turn empty strings into null, all the way down (TooDeep past MAX_JSON_DEPTH)."""
    if isinstance(value, str):
        value = value.strip()
        return value or None
    if isinstance(value, dict | list) and depth >= MAX_JSON_DEPTH:
        raise TooDeep(f"The request body is nested deeper than {MAX_JSON_DEPTH} levels.")
    if isinstance(value, dict):
        return {str(k): normalize(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v, depth + 1) for v in value]
    return value


def validate(model: type[ModelT], raw: RawInput, *, status: int) -> ModelT:
    if raw.problem is not None:
        raise ValidationFailed({"body": [raw.problem]}, status=status)
    try:
        parsed = model.model_validate(raw.data)
    except ValidationError as exc:
        raise ValidationFailed(laravel_errors(exc.errors()), status=status) from exc
    # PostgreSQL cannot store a NUL character in text; refuse it here, for both databases alike.
    with_nul = _paths_with_nul(parsed.model_dump())
    if with_nul:
        message = "The {} field must not contain NUL characters."
        raise ValidationFailed(
            {key: [message.format(key.replace("_", " "))] for key in with_nul}, status=status
        )
    return parsed


def _paths_with_nul(value: Any, path: str = "") -> list[str]:
    if isinstance(value, str):
        return [path or "body"] if "\x00" in value else []
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return []
    return [
        found for key, item in items for found in _paths_with_nul(item, f"{path}.{key}" if path else str(key))
    ]


def laravel_errors(details: list[ErrorDetails]) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for detail in details:
        # Pydantic adds the union member or validator name to some locations; they are not field names.
        loc = [str(p) for p in detail["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        key = ".".join(loc) or "body"
        message = _message(detail, key.replace("_", " "))
        bucket = errors.setdefault(key, [])
        if message not in bucket:
            bucket.append(message)
    return errors


def _message(detail: ErrorDetails, field: str) -> str:
    kind = detail["type"]
    if kind.endswith("_type") and detail.get("input", "") is None:
        # An empty string arrives as null (ConvertEmptyStringsToNull): Laravel's `required` rejects it.
        kind = "missing"
    ctx = detail.get("ctx") or {}
    templates = {
        "missing": "The {f} field is required.",
        "string_type": "The {f} field must be a string.",
        "string_too_long": "The {f} field must not be greater than {max_length} characters.",
        "int_parsing": "The {f} field must be an integer.",
        "int_type": "The {f} field must be an integer.",
        "int_from_float": "The {f} field must be an integer.",
        "bool_parsing": "The {f} field must be true or false.",
        "bool_type": "The {f} field must be true or false.",
        "greater_than_equal": "The {f} field must be at least {ge}.",
        "greater_than": "The {f} field must be greater than {gt}.",
        "less_than_equal": "The {f} field must not be greater than {le}.",
        "list_type": "The {f} field must be an array.",
        "too_long": "The {f} field must not have more than {max_length} items.",
        "too_short": "The {f} field must have at least {min_length} items.",
        "dict_type": "The {f} field must be an object.",
        "model_type": "The {f} field must be an object.",
        "model_attributes_type": "The {f} field must be an object.",
        "datetime_parsing": "The {f} field must be a valid date.",
        "datetime_type": "The {f} field must be a valid date.",
        "datetime_from_date_parsing": "The {f} field must be a valid date.",
        "literal_error": "The selected {f} is invalid.",
        "enum": "The selected {f} is invalid.",
        "email": "The {f} field must be a valid email address.",
        "ip": "The {f} field must be a valid IP address.",
        "timezone": "The {f} field must be a valid timezone.",
        "reply_prefix": "The {f} field must not start with RE: or FWD:.",
    }
    template = templates.get(kind)
    if template is None:
        return f"The {field} field is invalid."
    return template.format(f=field, **{k: v for k, v in ctx.items() if isinstance(v, str | int | float)})


# A plain ASCII address: a dot-atom local part (RFC 5322 atext) of at most 64 characters, then host
# name labels and a top-level label of letters. email_validator accepts every address this matches
# (unless its domain is special-use or has a `--`, which _plainly_valid leaves to it), so those skip its
# costlier checks: a batch of 1000 contacts otherwise spends most of its validation there.
_ATEXT = r"A-Za-z0-9_!#$%&'*+\-/=?^`{|}~"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_PLAIN_EMAIL = re.compile(
    rf"(?=[.{_ATEXT}]{{1,64}}@)[{_ATEXT}]+(?:\.[{_ATEXT}]+)*@(?:{_LABEL}\.)+[A-Za-z]{{2,63}}"
)


def _plainly_valid(value: str) -> bool:
    if len(value) > 254 or not _PLAIN_EMAIL.fullmatch(value):
        return False
    domain = value.rpartition("@")[2].lower()
    if "--" in domain:
        return False
    return not any(domain == name or domain.endswith("." + name) for name in SPECIAL_USE_DOMAIN_NAMES)


def _check_email(value: str) -> str:
    if _plainly_valid(value):
        return value
    try:
        validate_email(value, check_deliverability=False)
    except EmailNotValidError as exc:
        raise PydanticCustomError("email", "not a valid email address") from exc
    return value


EmailStr = Annotated[str, AfterValidator(_check_email)]


def as_list(value: Any) -> Any:
    """Arrays arrive as arrays, a single value, or (query strings) comma-separated text."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, int | dict):
        return [value]
    return value


ListIds = Annotated[list[int], BeforeValidator(as_list)]
