"""/v1 input validated into the spec models, with every invalid field named (400 `validation_error`,
detail `{path: [messages]}` with openmagpie's paths such as `sources[0].spec.query`), and the page
cursor's values. Reading them from the request (the body, `dry_run`, `limit`, `after`) is
`app.kit.v1_request`'s."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from app.kit.errors import DomainError

ModelT = TypeVar("ModelT", bound=BaseModel)

# The largest integer a behaviour value (an interval, a retention) may take: what the database's 32-bit
# integer column holds. Any positive integer up to it is the client's to choose.
MAX_INTEGER = 2**31 - 1


def invalid(errors: dict[str, list[str]], message: str = "The request is invalid.") -> DomainError:
    return DomainError(400, message, code="validation_error", errors=errors)


@cache
def union_tags(model: type[BaseModel]) -> tuple[str, ...]:
    """The tags of the model's discriminated unions in declaration order (a feed's source kinds), read
    from its validation schema: kit knows no domain's kinds."""
    tags: list[str] = []
    stack: list[Any] = [model.__pydantic_core_schema__]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == "tagged-union":
                tags.extend(tag for tag in node["choices"] if isinstance(tag, str) and tag not in tags)
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list | tuple):
            stack.extend(reversed(node))
    return tuple(tags)


def loc_path(loc: tuple[int | str, ...], tags: Collection[str] = ()) -> str:
    """`('sources', 0, 'spec', 'board_comment', 'query')` -> `sources[0].spec.query`: list indexes in
    brackets, and the union member (one of `tags`) pydantic adds after a discriminated `spec` left out."""
    parts: list[str] = []
    previous: int | str | None = None
    for segment in loc:
        if isinstance(segment, int):
            parts.append(f"[{segment}]")
        elif (previous == "spec" and segment in tags) or (
            isinstance(segment, str) and segment.startswith("function-")
        ):
            pass
        else:
            parts.append(segment if not parts else f".{segment}")
        previous = segment
    return "".join(parts) or "body"


def _message(detail: ErrorDetails, tags: Collection[str]) -> str:
    kind = detail["type"]
    if kind == "missing":
        return "This field is required."
    if kind == "union_tag_not_found":
        return f"A source spec needs a `kind`: one of {', '.join(tags)}."
    if kind == "union_tag_invalid":
        found = (detail.get("ctx") or {}).get("tag", "")
        return f"Unknown source kind {found!r}: use one of {', '.join(tags)}."
    message = detail["msg"]
    # Custom errors are phrased as predicates ("must not be blank"): make them sentences.
    if message[:1].islower():
        message = message[0].upper() + message[1:]
    return message if message.endswith(".") else message + "."


def field_errors(exc: ValidationError, prefix: str = "", tags: Collection[str] = ()) -> dict[str, list[str]]:
    """Each invalid field's messages by its path; `tags` are the discriminated unions' (union_tags)."""
    errors: dict[str, list[str]] = {}
    for detail in exc.errors(include_url=False):
        path = loc_path(tuple(detail["loc"]), tags)
        if prefix:
            path = prefix if path == "body" else f"{prefix}{'' if path.startswith('[') else '.'}{path}"
        bucket = errors.setdefault(path, [])
        message = _message(detail, tags)
        if message not in bucket:
            bucket.append(message)
    return errors


# A path under construction: (segment, the parent's path), so each value costs one small tuple and a
# path's text is made only for a value that is reported.
_Path = tuple[str, "_Path"] | None


def _path_text(path: _Path) -> str:
    segments: list[str] = []
    while path is not None:
        segment, path = path
        segments.append(segment)
    text = "".join(reversed(segments)).removeprefix(".")
    return text or "body"


def _paths_with_nul(value: Any) -> list[str]:
    """The paths of every string, object key included, that holds a NUL (PostgreSQL refuses one in
    text and jsonb alike). Walked with a stack rather than by recursion: orjson accepts JSON nested
    1,000 deep, more than Python's recursion limit allows a recursive walk."""
    found: set[str] = set()
    stack: list[tuple[Any, _Path]] = [(value, None)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                found.add(_path_text(path))
        elif isinstance(item, dict):
            for key, child in item.items():
                child_path: _Path = (f".{key}", path)
                if "\x00" in key:
                    found.add(_path_text(child_path))
                stack.append((child, child_path))
        elif isinstance(item, list):
            stack.extend((child, (f"[{i}]", path)) for i, child in enumerate(item))
    return sorted(found)


def validate(model: type[ModelT], data: Any) -> ModelT:
    """`data` as `model`, or 400 naming each invalid field."""
    with_nul = _paths_with_nul(data)
    if with_nul:
        raise invalid({path: ["Text must not contain NUL characters."] for path in with_nul})
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid(field_errors(exc, tags=union_tags(model))) from exc


@dataclass(frozen=True, slots=True)
class Cursor:
    limit: int
    after: str | None
