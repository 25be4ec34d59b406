"""The committed OpenAPI documents: built from the routes, served as YAML, written by `tidings openapi`."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel

from app.authroutes import api_auth, v1_auth
from app.feeds.router import feed_routers
from app.kit.openapi import add_body_schemas, add_model_schemas
from app.kit.v1_request import is_dry_run, read_cursor
from app.kit.v1_wire import ErrorOut as FeedErrorOut
from app.mail.events.described import events_openapi
from app.mail.router import mail_router
from app.mail.wire import ErrorOut
from app.watches.actions import ACTIONS
from app.watches.router import watch_routers

# The top-level openapi/ of the source tree, shipped inside the package as `app._openapi` (setup.py).
OPENAPI_DIR = Path(str(files("app._openapi")))
MAIL_API_VERSION = "1.2.0"
# The better-auth release whose behaviour /api/auth follows (tests/authroutes/js/package.json).
AUTH_API_VERSION = "1.7.25"

MAIL_DESCRIPTION = """\
Contacts, lists, campaigns, automations, forms and custom fields: SendFox's REST API 1.2.0.

Authenticate with `Authorization: Bearer <token>` (a personal access token from
`tidings tokens create`). Input is read from a JSON body, a form body
or the query string. Lists are paginated with `?page=N` (1-based). Every route answers 401 without
valid credentials and 429 past 60 requests a minute per user (`X-RateLimit-Limit`,
`X-RateLimit-Remaining`, and `Retry-After` on 429). Every route but `GET /me` answers 403 for accounts
on the free plan. Timestamps are UTC ISO 8601 with `Z`; campaign rates and list averages are percentages.
"""


def _add_common_responses(document: dict[str, Any]) -> None:
    error_ref = {"$ref": "#/components/schemas/ErrorOut"}
    common = {
        "401": {
            "description": "Missing or invalid credentials",
            "content": {"application/json": {"schema": error_ref}},
        },
        "429": {
            "description": "Rate limit exceeded; see Retry-After",
            "content": {"application/json": {"schema": error_ref}},
        },
    }
    for path, operations in document["paths"].items():
        if path.startswith("/webhooks/bounces/"):
            # Called by email providers, who authenticate their own way (the routes say how).
            continue
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            # FastAPI documents its own 422 for path parameters; a malformed id is a 404 here.
            if "422" in responses and not _declares(operation, "422"):
                del responses["422"]
            for status, response in common.items():
                responses.setdefault(status, response)
            if path != "/me":
                responses.setdefault(
                    "403",
                    {
                        "description": "The account's plan has no API access",
                        "content": {"application/json": {"schema": error_ref}},
                    },
                )


def _declares(operation: dict[str, Any], status: str) -> bool:
    schema = (
        operation.get("responses", {})
        .get(status, {})
        .get("content", {})
        .get("application/json", {})
        .get("schema", {})
    )
    return bool(schema.get("$ref", "").endswith("/ErrorOut"))


PAGE = {"name": "page", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 1}}


def _add_pages(document: dict[str, Any]) -> None:
    for operations in document["paths"].values():
        get = operations.get("get")
        if get is None:
            continue
        parameters = get.setdefault("parameters", [])
        if "Page_" in str(get["responses"].get("200", {})):
            parameters.append(PAGE)
        if not parameters:
            del get["parameters"]


@cache
def mail_openapi() -> dict[str, Any]:
    document = get_openapi(
        title="Tidings email API (SendFox-compatible)",
        version=MAIL_API_VERSION,
        description=MAIL_DESCRIPTION,
        routes=mail_router.routes,
    )
    components = document.setdefault("components", {})
    components.setdefault("schemas", {})["ErrorOut"] = ErrorOut.model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    components["securitySchemes"] = {"bearerAuth": {"type": "http", "scheme": "bearer"}}
    document["security"] = [{"bearerAuth": []}]
    add_body_schemas(document)
    _add_pages(document)
    _add_common_responses(document)
    document["webhooks"] = events_openapi(components["schemas"])
    for unused in ("HTTPValidationError", "ValidationError"):
        components["schemas"].pop(unused, None)
    return document


FEEDS_API_VERSION = "1.0.0"
FEEDS_DESCRIPTION = """\
Feeds collect items from their sources (RSS and Atom documents, Hacker News stories and comments, a
Reddit community's new posts) on an interval. Watches subscribe to feeds and run each new item through
an ordered chain of actions (semantic_filter, extract, log, webhook; and `email`, beyond openmagpie:
the items become a campaign of the email API); each action on an item is a run, and each webhook call a
delivery. This is openmagpie's `/v1` feed and watch API.

Authenticate with `Authorization: Bearer <token>` (a personal access token from `tidings tokens create`).
Errors are `{"error": "<code>", "detail": ...}`: 400 `validation_error` (detail maps each invalid field,
as `sources[0].spec.query`, to its messages), 401 `not_authenticated`, 404 `not_found`, 409 conflicts.
Write routes take `?dry_run=true` (1, true, yes, on): everything is validated, nothing is stored, and the
answer is 200. Lists take `?limit=` (default 50, at most 200) and `?after=`; ids are ULIDs, newest first,
and `next_cursor` is null on a page that is not full. A trailing slash on any path is optional.
"""
# The kind-specific `config` of an action input: documented beside it, one schema per kind.
# Each action kind's config schema, from the registry (a new kind is documented by its entry there).
ACTION_CONFIGS: list[type[BaseModel]] = [action.config_model for action in ACTIONS.values()]
DRY_RUN = {
    "name": "dry_run",
    "in": "query",
    "required": False,
    "schema": {"type": "boolean"},
    "description": "Validate only: store nothing (1, true, yes, on)",
}
CURSOR_PARAMETERS = [
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50},
    },
    {
        "name": "after",
        "in": "query",
        "required": False,
        "schema": {"type": "string"},
        "description": "The previous page's next_cursor",
    },
]


def _depends_on(route: APIRoute, call: Callable[..., Any]) -> bool:
    pending = list(route.dependant.dependencies)
    while pending:
        dependency = pending.pop()
        if dependency.call is call:
            return True
        pending.extend(dependency.dependencies)
    return False


def _feed_inputs(document: dict[str, Any], routes: list[APIRoute]) -> None:
    add_body_schemas(document)
    add_model_schemas(document, ACTION_CONFIGS)
    error_ref = {"$ref": "#/components/schemas/FeedError"}
    for route in routes:
        for method in sorted(route.methods or ()):
            operation = document["paths"][route.path_format][method.lower()]
            # What the route's dependencies read from the query string: ?dry_run= and the cursor.
            parameters = operation.setdefault("parameters", [])
            declared = (route.openapi_extra or {}).get("parameters", [])
            at = len(parameters) - len(declared)
            if _depends_on(route, is_dry_run):
                parameters.insert(at, DRY_RUN)
            if _depends_on(route, read_cursor):
                parameters[at:at] = CURSOR_PARAMETERS
            if not parameters:
                del operation["parameters"]
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            if operation.get("security") != []:
                responses.setdefault(
                    "401",
                    {
                        "description": "Missing or invalid credentials (`not_authenticated`)",
                        "content": {"application/json": {"schema": error_ref}},
                    },
                )
            for response in responses.values():
                schema = response.get("content", {}).get("application/json", {}).get("schema", {})
                if schema.get("$ref", "").endswith("/ErrorOut"):
                    schema["$ref"] = "#/components/schemas/FeedError"


@cache
def feeds_openapi() -> dict[str, Any]:
    routes = [route for router in [v1_auth.router, *feed_routers, *watch_routers] for route in router.routes]
    document = get_openapi(
        title="Tidings feeds and watches API (openmagpie-compatible)",
        version=FEEDS_API_VERSION,
        description=FEEDS_DESCRIPTION,
        routes=routes,
    )
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas.pop("ErrorOut", None)
    schemas["FeedError"] = FeedErrorOut.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas["FeedError"]["title"] = "FeedError"
    components["securitySchemes"] = {
        "bearerAuth": {"type": "http", "scheme": "bearer"},
        "sessionCookie": {"type": "apiKey", "in": "cookie", "name": "tidings.session_token"},
    }
    document["security"] = [{"bearerAuth": []}, {"sessionCookie": []}]
    _feed_inputs(
        document, [route for route in routes if isinstance(route, APIRoute) and route.include_in_schema]
    )
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    return document


AUTH_DESCRIPTION = """\
Account sign-in routes that answer as better-auth (with its `username` plugin) does, so that
better-auth's own client (`createAuthClient` with `usernameClient`, base URL `<service>/api/auth`) works
unchanged.

Signing in sets the session cookie `tidings.session_token` (HttpOnly, SameSite=Lax, Path=/, Secure on
https); the same cookie signs in to `/v1` and the account pages. A POST that carries cookies must carry
an `Origin` (or `Referer`) of this service, else 403 `MISSING_OR_NULL_ORIGIN` or `INVALID_ORIGIN`.
Errors are `{"code", "message"}` with better-auth's codes. Sign-up is closed unless
`TIDINGS_AUTH_SIGNUP_ENABLED` is true; who may change their username is set by
`TIDINGS_AUTH_USERNAME_CHANGE` (`never`, `non_staff`, `always`). Ten failed sign-ins for one username in
15 minutes (or a hundred from one address) make every sign-in for it answer 429 until the window passes.
"""


@cache
def auth_openapi() -> dict[str, Any]:
    document = get_openapi(
        title="Tidings account auth (better-auth compatible)",
        version=AUTH_API_VERSION,
        description=AUTH_DESCRIPTION,
        routes=api_auth.router.routes,
    )
    # An optional field is left out, not sent as null: a `default: null` would say otherwise.
    add_body_schemas(document, null_defaults=False)
    schemas = document["components"]["schemas"]
    document["components"]["securitySchemes"] = {
        "sessionCookie": {"type": "apiKey", "in": "cookie", "name": "tidings.session_token"}
    }
    for path in ("/api/auth/update-user", "/api/auth/get-session", "/api/auth/sign-out"):
        for operation in document["paths"][path].values():
            operation["security"] = [{"sessionCookie": []}]
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    return document


@cache
def feeds_openapi_yaml_text() -> str:
    return to_yaml(feeds_openapi())


def to_yaml(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


DOCUMENTS = {"mail.yaml": mail_openapi, "feeds.yaml": feeds_openapi, "auth.yaml": auth_openapi}


def write_documents(directory: Path = OPENAPI_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, build in DOCUMENTS.items():
        path = directory / name
        path.write_text(to_yaml(build()))
        written.append(path)
    return written


@cache
def mail_openapi_yaml_text() -> str:
    """Rendered once per process: dumping the document costs a tenth of a second, every app made."""
    return to_yaml(mail_openapi())


@cache
def auth_openapi_yaml_text() -> str:
    return to_yaml(auth_openapi())
