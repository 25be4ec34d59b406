"""OpenAPI declared where the route is. Routes read their input themselves (their own parsers give each
interface its own errors), so FastAPI cannot see it: a route says what it reads with
`openapi_extra=request_body(Model)` or `openapi_extra=query_parameters(...)`, and the document builders
(app/openapi_docs.py) put each body model's JSON schema into the document's components
(`add_body_schemas`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
REF_TEMPLATE = "#/components/schemas/{model}"
REF_PREFIX = "#/components/schemas/"

# The mark of an operation, schema or field that the interface's own document (SendFox's API, openmagpie)
# does not have: `openapi_extra=EXTENSION` on a route, `json_schema_extra=EXTENSION` on a model or field,
# `**EXTENSION` inside a fragment written by hand. Clients that know only the original ignore it.
EXTENSION: dict[str, Any] = {"x-tidings-extension": True}

# Every model a route names as its body, by the schema name its $ref uses.
_BODY_MODELS: dict[str, type[BaseModel]] = {}


def schema_ref(model: type[BaseModel]) -> dict[str, Any]:
    """A $ref to `model`'s schema in components, which add_body_schemas fills in."""
    name = model.__name__
    known = _BODY_MODELS.setdefault(name, model)
    if known is not model:
        raise ValueError(f"two body models are named {name}: {known.__module__} and {model.__module__}")
    return {"$ref": REF_PREFIX + name}


def request_body(
    model: type[BaseModel],
    *,
    media_types: Sequence[str] = (JSON,),
    schema: dict[str, Any] | None = None,
    required: bool = True,
) -> dict[str, Any]:
    """The `openapi_extra` of a route whose body is `model` (`schema` when it takes other shapes too;
    `required=False` when the body may be left out)."""
    ref = schema_ref(model)
    body_schema = schema if schema is not None else ref
    return {
        "requestBody": {
            "required": required,
            "content": {media_type: {"schema": body_schema} for media_type in media_types},
        }
    }


def query_parameter(name: str, schema: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    parameter: dict[str, Any] = {"name": name, "in": "query", "required": False, "schema": schema}
    if description is not None:
        parameter["description"] = description
    return parameter


def query_parameters(*parameters: dict[str, Any]) -> dict[str, Any]:
    """The `openapi_extra` of a route that reads these query parameters itself."""
    return {"parameters": list(parameters)}


def _body_refs(document: dict[str, Any]) -> Iterable[str]:
    for operations in document["paths"].values():
        for operation in operations.values():
            for media in operation.get("requestBody", {}).get("content", {}).values():
                schema = media.get("schema", {})
                for member in [schema, *schema.get("oneOf", [])]:
                    ref = member.get("$ref", "")
                    if ref.startswith(REF_PREFIX):
                        yield ref.removeprefix(REF_PREFIX)


def add_body_schemas(document: dict[str, Any], *, null_defaults: bool = True) -> list[str]:
    """Put the schema of every body model the document's operations name into its components, in the
    order the operations name them; the names added. Without `null_defaults`, a `default: null` is left
    out of the models' properties (an optional field is then left out, not sent as null)."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    added: list[str] = []
    for name in dict.fromkeys(_body_refs(document)):
        model = _BODY_MODELS.get(name)
        if model is None:
            continue
        schema = model.model_json_schema(ref_template=REF_TEMPLATE, by_alias=True)
        if not null_defaults:
            for prop in schema.get("properties", {}).values():
                if "default" in prop and prop["default"] is None:
                    del prop["default"]
        schemas.update(schema.pop("$defs", {}))
        schemas[name] = schema
        added.append(name)
    return added


def add_model_schemas(document: dict[str, Any], models: Iterable[type[BaseModel]]) -> None:
    """Components for schemas the document names only in descriptions (no operation refers to them)."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for model in models:
        schema = model.model_json_schema(ref_template=REF_TEMPLATE)
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
