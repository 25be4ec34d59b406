"""An action's config as a form, drawn from its kind's config model (ACTIONS[kind].config_model, the one
the /v1 API validates with): one generic reader and renderer over the model's fields, so a new kind or
field needs no console change. The form only turns fields into the JSON the API takes; validating is
still the API's model and chain service, whose messages are shown beside the field they name.

Widgets by the field's type: text (a textarea past 500 characters), number, a checkbox for a bool, a
select for a Literal, one field per sub-field of a nested model (`engine.kind`), and a textarea of one
entry per line for a list (`name: description` for a list of models) or a mapping (`Name: value`)."""

from __future__ import annotations

import re
import types
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin

from annotated_types import MaxLen
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from app.console.pages import Form
from app.kit.json_types import JsonObject
from app.kit.v1_input import invalid
from app.models import ActionKind
from app.watches.actions import ACTIONS

# Form fields carry this prefix so they never meet the page's own (`kind`, `direction`).
PREFIX = "config."
LONG_TEXT = 500
ERROR_KEY = re.compile(r"config\.([A-Za-z_]+)")


@dataclass(frozen=True)
class ConfigField:
    """One form field of a config: `path` is its place in the config (`engine.kind`)."""

    path: str
    label: str
    widget: Literal["text", "textarea", "number", "checkbox", "select", "lines"]
    optional: bool  # blank means "leave it out" (the model's default applies)
    choices: tuple[str, ...] = ()
    hint: str = ""
    # For "lines": the names of a listed model's fields (`name: description`), or ("", "") for a mapping.
    parts: tuple[str, ...] = ()
    default: Any = None


@dataclass
class Shown:
    """A field as a page draws it, with its value and the API's messages about it."""

    spec: ConfigField
    name: str
    id: str
    value: str
    checked: bool
    errors: list[str] = field(default_factory=list)


def _optional(annotation: Any) -> tuple[Any, bool]:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def _fields_of(model: type[BaseModel], prefix: str = "") -> list[ConfigField]:
    found: list[ConfigField] = []
    for name, info in model.model_fields.items():
        found.extend(_field(prefix + name, info))
    return found


def _label(path: str) -> str:
    return path.replace(".", " ").replace("_", " ").capitalize()


def _field(path: str, info: FieldInfo) -> list[ConfigField]:
    annotation, optional = _optional(info.annotation)
    default = None if info.default is PydanticUndefined else info.default
    hint = info.description or ""
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _fields_of(annotation, path + ".")
    if annotation is bool:
        return [ConfigField(path, _label(path), "checkbox", False, default=default)]
    if origin is Literal:
        choices = tuple(str(choice) for choice in get_args(annotation))
        return [ConfigField(path, _label(path), "select", False, choices, hint, default=default)]
    if annotation in (int, float):
        return [ConfigField(path, _label(path), "number", not info.is_required(), hint=hint, default=default)]
    if origin is list:
        (item,) = get_args(annotation)
        item = get_origin(item) or item
        parts = tuple(item.model_fields) if isinstance(item, type) and issubclass(item, BaseModel) else ()
        what = ": ".join(parts) if parts else "one"
        hint = f"One per line ({what}). {hint}".strip()
        return [ConfigField(path, _label(path), "lines", False, parts=parts, hint=hint, default=default)]
    if origin is dict:
        hint = f"One per line (Name: value). {hint}".strip()
        return [ConfigField(path, _label(path), "lines", False, parts=("", ""), hint=hint, default=default)]
    longest = max((m.max_length for m in info.metadata if isinstance(m, MaxLen)), default=0)
    widget: Literal["text", "textarea"] = "textarea" if longest > LONG_TEXT else "text"
    blank_is_absent = optional or (not info.is_required() and default is None)
    return [ConfigField(path, _label(path), widget, blank_is_absent, hint=hint, default=default)]


@cache
def fields_of(kind: str) -> tuple[ConfigField, ...]:
    return tuple(_fields_of(ACTIONS[ActionKind(kind)].config_model))


def _at(config: dict[str, Any], path: str) -> Any:
    value: Any = config
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _put(config: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        config = config.setdefault(part, {})
    config[last] = value


def _as_text(spec: ConfigField, value: Any) -> str:
    if value is None:
        return ""
    if spec.widget == "lines" and isinstance(value, dict):
        return "\n".join(f"{name}: {item}" for name, item in value.items())
    if spec.widget == "lines" and isinstance(value, list):
        return "\n".join(
            ": ".join(str(entry.get(part, "")) for part in spec.parts)
            if isinstance(entry, dict)
            else str(entry)
            for entry in value
        )
    return str(value)


def values_of_config(kind: str, config: dict[str, Any] | None) -> dict[str, str]:
    """A config (as the API shows it, secrets masked) as the form's values; None: the model's defaults."""
    values: dict[str, str] = {}
    for spec in fields_of(kind):
        value = spec.default if config is None else _at(config, spec.path)
        values[spec.path] = ("on" if value else "") if spec.widget == "checkbox" else _as_text(spec, value)
    return values


def values_of_form(kind: str, form: Form) -> dict[str, str]:
    """What was posted, kept to draw the form again beside the API's messages."""
    return {spec.path: form.get(PREFIX + spec.path) for spec in fields_of(kind)}


def _entries(spec: ConfigField, text: str) -> Any:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not spec.parts:
        return lines
    if spec.parts == ("", ""):
        mapping: dict[str, str] = {}
        for line in lines:
            name, colon, value = line.partition(":")
            if not colon:
                raise invalid(
                    {PREFIX + spec.path: [f"Write each entry as Name: value ({line!r} has no colon)."]}
                )
            mapping[name.strip()] = value.strip()
        return mapping
    entries = []
    for line in lines:
        pieces = [piece.strip() for piece in line.split(":", len(spec.parts) - 1)]
        entries.append(dict(zip(spec.parts, pieces, strict=False)))
    return entries


def config_of_form(kind: str, form: Form) -> JsonObject:
    """The posted form as the config JSON the API takes: blank optional fields left out."""
    config: dict[str, Any] = {}
    for spec in fields_of(kind):
        raw = form.get(PREFIX + spec.path)
        if spec.widget == "checkbox":
            _put(config, spec.path, bool(raw))
        elif spec.widget == "lines":
            _put(config, spec.path, _entries(spec, raw))
        elif spec.optional and not raw.strip():
            continue
        else:
            _put(config, spec.path, raw.strip() if spec.widget in ("number", "select") else raw)
    return config


def shown_fields(
    kind: str, form_key: str, values: dict[str, str], errors: dict[str, list[str]]
) -> list[Shown]:
    """The fields of one form, each with its value and the messages of the API that name it."""
    shown: list[Shown] = []
    told: set[str] = set()
    for spec in fields_of(kind):
        top = spec.path.split(".")[0]  # a nested model's messages go beside its first field
        shown.append(
            Shown(
                spec,
                PREFIX + spec.path,
                f"{form_key}-{spec.path.replace('.', '-')}",
                values.get(spec.path, ""),
                bool(values.get(spec.path)),
                [] if top in told else errors.get(top, []),
            )
        )
        told.add(top)
    return shown


def errors_by_field(errors: dict[str, list[str]]) -> tuple[dict[str, list[str]], list[str]]:
    """The API's messages by the config's top-level field they name (`config.fields[0].name` is
    `fields`), and the rest (`kind`, `body`), which the page shows above the form."""
    by_field: dict[str, list[str]] = {}
    rest: list[str] = []
    for key, messages in errors.items():
        named = ERROR_KEY.match(key)
        if named:
            by_field.setdefault(named.group(1), []).extend(
                f"{key.removeprefix('config.')}: {message}" if key != named.group(0) else message
                for message in messages
            )
        else:
            rest.extend(f"{key}: {message}" for message in messages)
    return by_field, rest
