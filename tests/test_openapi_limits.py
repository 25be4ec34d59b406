"""Every limit the three OpenAPI documents state on a request body or a query parameter (maxLength,
minLength, maximum, minimum, maxItems, minItems) is the limit the route enforces: a value one past it is
refused with a documented error status that names the field, and a value at it is not refused for that
field. The cases are read from the documents the app serves, so a new limit is covered by adding it.

A body is the smallest the schema allows (required fields only), with the value under test put in at
its place; the answer is judged by whether it names that field, so the other fields need not make a
valid write. Query-parameter limits are clamps, never errors (docs/compatibility.md: `?page=` below 1
is page 1, `?limit=` above 200 is 200): one past them answers 200."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from app.openapi_docs import auth_openapi, feeds_openapi, mail_openapi
from tests.conftest import ApiUser

DOCUMENTS = {"mail": mail_openapi, "feeds": feeds_openapi, "auth": auth_openapi}
LIMITS = ("maxLength", "minLength", "maximum", "minimum", "maxItems", "minItems")
VALIDATION_STATUSES = {"400", "422"}
ORIGIN = "http://127.0.0.1:8000"  # the test settings' base URL
HTTP_METHODS = ("get", "post", "put", "patch", "delete")
Step = tuple[str | int, dict[str, Any]]


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def members(document: dict[str, Any], schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The shapes a value may take (the members of anyOf/oneOf), null left out."""
    schema = resolve(document, schema)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            found = [resolve(document, member) for member in schema[key]]
            # A member keeps the title of the field it belongs to (is_email reads it).
            named = [{"title": schema.get("title", ""), **member} for member in found]
            return [member for member in named if member.get("type") != "null"]
    return [schema]


def is_email(schema: dict[str, Any]) -> bool:
    # The email API documents its email fields as plain strings: their names say what they hold.
    return schema.get("format") == "email" or "email" in str(schema.get("title", "")).lower()


def text(length: int, schema: dict[str, Any], index: int = 0) -> str:
    """A string of exactly `length` characters that its format (email, URL) would accept."""
    seed = f"v{index}" if index else "v"
    if is_email(schema) and length >= 8:
        # A local part of at most 64 characters, then domain labels of at most 63 before "ex.com".
        local = "a" * min(64, length - 7)
        need = length - len(local) - 7
        labels: list[str] = []
        while need >= 2:
            labels.append("d" * min(63, need - 1))
            need -= len(labels[-1]) + 1
        base = "ex.com"
        if need == 1:
            if labels:
                labels[-1] += "d"
            else:
                base = "exx.com"
        return f"{local}@{'.'.join([*labels, base])}"
    if schema.get("format") in ("uri", "url") or "url" in str(schema.get("title", "")).lower():
        prefix = "https://example.com/"
        if length > len(prefix):
            return prefix + "p" * (length - len(prefix))
    return (seed * length)[:length] if length else ""


def example(document: dict[str, Any], schema: dict[str, Any], index: int = 0, depth: int = 0) -> Any:
    """The smallest value the schema accepts: required fields only, shortest strings, least numbers."""
    schema = members(document, schema)[0]
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        if depth > 6:
            return {}
        properties = schema.get("properties", {})
        return {
            name: example(document, properties[name], index, depth + 1)
            for name in schema.get("required", [])
            if name in properties
        }
    if kind == "array":
        return [
            example(document, schema.get("items", {}), i, depth + 1) for i in range(schema.get("minItems", 0))
        ]
    if kind == "string":
        if is_email(schema):
            return f"x{index}@example.com"
        if schema.get("format") in ("uri", "url") or "url" in str(schema.get("title", "")).lower():
            return f"https://example.com/{index}"
        shortest = max(schema.get("minLength", 1), 1)
        return (
            f"value{index}" if schema.get("maxLength", 10) >= 10 > shortest else text(shortest, schema, index)
        )
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    return "v"


def value_at(document: dict[str, Any], schema: dict[str, Any], key: str, limit: int, past: bool) -> Any:
    """A value at `limit` (or one past it) for the limit `key` of `schema`."""
    size = limit + (1 if key.startswith("max") else -1) if past else limit
    if key in ("maxLength", "minLength"):
        return text(max(size, 0), schema)
    if key in ("maxItems", "minItems"):
        return [example(document, schema.get("items", {}), i + 1) for i in range(max(size, 0))]
    return size


def sites(
    document: dict[str, Any], schema: dict[str, Any], steps: tuple[Step, ...] = ()
) -> Iterator[tuple[tuple[Step, ...], dict[str, Any], str, int]]:
    """Every limit within the schema: (the steps to it, its schema, the limit's key, its value)."""
    if len(steps) > 6:
        return
    for member in members(document, schema):
        for key in LIMITS:
            if key in member:
                yield steps, member, key, member[key]
        for name, child in member.get("properties", {}).items():
            yield from sites(document, child, (*steps, (name, member)))
        if member.get("type") == "array" and "items" in member:
            items = member["items"]
            if "$ref" not in items:  # an item keeps the title of its list (is_email reads it)
                items = {"title": member.get("title", ""), **items}
            yield from sites(document, items, (*steps, (0, member)))


def put(document: dict[str, Any], steps: tuple[Step, ...], value: Any) -> Any:
    """The smallest body whose place `steps` holds `value`."""
    if not steps:
        return value
    (key, container), rest = steps[0], steps[1:]
    if isinstance(key, int):
        return [put(document, rest, value)]
    body = example(document, container)
    body[key] = put(document, rest, value)
    return body


@dataclass(frozen=True)
class Case:
    document: str
    method: str
    path: str
    where: str  # body or query
    steps: tuple[Step, ...]
    schema: dict[str, Any]
    key: str
    limit: int

    @property
    def field(self) -> str:
        names = [str(key) for key, _ in self.steps if isinstance(key, str)]
        return names[-1] if names else "body"

    def __str__(self) -> str:
        place = "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key, _ in self.steps)
        shape = self.steps[-1][1].get("title") if self.steps else None
        within = f"({shape})" if shape else ""
        operation = f"{self.document}:{self.method.upper()} {self.path}"
        return f"{operation} {self.where}{place}{within} {self.key}={self.limit}"


def cases() -> list[Case]:
    found: list[Case] = []
    for name, build in DOCUMENTS.items():
        document = build()
        for path, item in document["paths"].items():
            for method in HTTP_METHODS:
                operation = item.get(method)
                if operation is None:
                    continue
                for parameter in operation.get("parameters", []):
                    if parameter["in"] != "query":
                        continue
                    for _, schema, key, limit in sites(document, parameter["schema"]):
                        steps: tuple[Step, ...] = ((parameter["name"], {}),)
                        found.append(Case(name, method, path, "query", steps, schema, key, limit))
                content = operation.get("requestBody", {}).get("content", {})
                if "application/json" in content:
                    for steps, schema, key, limit in sites(document, content["application/json"]["schema"]):
                        found.append(Case(name, method, path, "body", steps, schema, key, limit))
    return found


CASES = cases()


def test_the_documents_state_limits_in_each_document() -> None:
    """The generator finds the limits (a walk that found none would pass every case vacuously)."""
    counts = {name: sum(1 for case in CASES if case.document == name) for name in DOCUMENTS}
    assert all(count > 0 for count in counts.values()), counts


@pytest.fixture
def limits_client(settings: Settings, session_factory: Any) -> Iterator[TestClient]:
    open_settings = settings.model_copy(update={"auth_signup_enabled": True})
    app = create_app(settings=open_settings, session_factory=session_factory)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture
def path_ids(limits_client: TestClient, api_user: ApiUser) -> dict[str, str]:
    """An id of each kind of thing a documented path names, made through the API."""
    client, headers = limits_client, api_user.headers

    def made(path: str, body: dict[str, Any], *within: str) -> str:
        response = client.post(path, json=body, headers=headers)
        assert response.status_code in (200, 201), (path, response.text)
        answer = response.json()
        for key in within:
            answer = answer[key]
        return str(answer["id"])

    letter = {"subject": "S", "html": "<p>x</p>", "from_name": "N", "from_email": "n@example.com"}
    automation = made("/automations", {"title": "A"})
    contact_list = made("/lists", {"name": "L"})
    webhook = made("/webhooks", {"url": "https://example.com/hook", "events": ["campaign.sent"]})
    watch = made("/v1/watches", {"name": "W"})
    return {
        "/contacts/{id}": made("/contacts", {"email": "limits@example.com"}),
        "/campaigns/{id}": made("/campaigns", {"title": "T", **letter}),
        "/automations/{id}": automation,
        "/automation-emails/{id}": made(f"/automations/{automation}/emails", letter),
        "{list_id}": contact_list,
        "{webhook_id}": webhook,
        "{feed_id}": made("/v1/feeds", {"name": "F", "kind": "curated"}),
        "{watch_id}": watch,
        "{action_id}": made(f"/v1/watches/{watch}/actions", {"kind": "log", "config": {}}, "action"),
    }


def url_of(case: Case, path_ids: dict[str, str]) -> str:
    path = case.path
    for pattern, value in path_ids.items():
        if not pattern.startswith("/"):
            path = path.replace(pattern, value)
        elif path == pattern or path.startswith(pattern + "/"):
            path = path.replace("{id}", value, 1)
    return path


def blamed(case: Case, answer: Any) -> set[str]:
    """What an error answer says of the case's field (its messages), in each interface's error shape: the
    messages under a key whose last name (indexes left out) is the field's."""
    if not isinstance(answer, dict):
        return set()
    found: dict[str, list[str]] = {}
    if case.document == "mail":
        found = answer.get("errors") or {}
    elif case.document == "feeds":
        detail = answer.get("detail")
        found = detail if isinstance(detail, dict) else {}
    else:
        for key, message in re.findall(r"\[body\.([^\]]+)\] ([^;]*)", str(answer.get("message", ""))):
            found.setdefault(key, []).append(message)
        # The username and password rules answer in codes of their own (USERNAME_TOO_LONG, ...).
        code = str(answer.get("code", ""))
        for name in ("username", "password"):
            if code.startswith(name.upper() + "_TOO_"):
                found.setdefault(name, []).append(code)
    messages: set[str] = set()
    for key, said in found.items():
        names = [part for part in re.split(r"[.\[\]]+", key) if part and not part.isdigit()]
        if names and names[-1] == case.field:
            messages.update(said if isinstance(said, list) else [str(said)])
    return messages


def send(
    client: TestClient, case: Case, url: str, value: Any, user: ApiUser, document: dict[str, Any]
) -> Any:
    headers = {**user.headers, "Origin": ORIGIN}
    if case.where == "query":
        return client.request(case.method, url, params={case.field: value}, headers=headers)
    body = put(document, case.steps, value)
    operation = document["paths"][case.path][case.method]
    params = {}
    if any(parameter["name"] == "dry_run" for parameter in operation.get("parameters", [])):
        params["dry_run"] = "true"
    return client.request(case.method, url, json=body, params=params, headers=headers)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_one_past_each_documented_limit_is_refused_and_at_it_is_not(
    case: Case, limits_client: TestClient, api_user: ApiUser, path_ids: dict[str, str]
) -> None:
    client = limits_client
    document = DOCUMENTS[case.document]()
    operation = document["paths"][case.path][case.method]
    if case.document == "auth" and case.path.endswith("/update-user"):
        signed_up = client.post(
            "/api/auth/sign-up/email",
            json={"name": "L", "email": "limits-auth@example.com", "password": "long enough password"},
            headers={"Origin": ORIGIN},
        )
        assert signed_up.status_code == 200, signed_up.text
    url = url_of(case, path_ids)

    past = send(
        client, case, url, value_at(document, case.schema, case.key, case.limit, True), api_user, document
    )
    if case.where == "query":
        assert past.status_code == 200, (str(case), past.status_code, past.text[:300])
        refusal: set[str] = set()
    else:
        documented = VALIDATION_STATUSES & set(operation["responses"])
        assert documented, f"{case}: no validation status documented"
        assert str(past.status_code) in documented, (str(case), past.status_code, past.text[:300])
        refusal = blamed(case, past.json())
        assert refusal, (str(case), "the refusal does not name the field", past.text[:300])

    # At the limit, the refusal for the size is gone (the field may still be refused for what it says,
    # as an id of no feed is).
    at = send(
        client, case, url, value_at(document, case.schema, case.key, case.limit, False), api_user, document
    )
    assert at.status_code < 500, (str(case), at.text[:300])
    if at.status_code >= 400 and refusal:
        assert not refusal <= blamed(case, at.json()), (str(case), at.status_code, at.text[:300])
