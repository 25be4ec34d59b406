"""Garbage sent to every write route of the email API.

Whatever arrives (malformed or non-object JSON, wrong types, huge or deeply nested values, NUL and
unpaired surrogates, SQL, odd content types, PHP bracket keys of any shape, ids that are not ids), the
answer is never a 5xx: it is SendFox's status for the route (400 on POST /contacts, PATCH /unsubscribe
and POST /lists, 422 on the other validations, 404 for an id that names nothing) with a JSON body
holding a string `message` and, on validation, `errors` mapping field names to lists of strings. A
rejected request writes nothing.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from httpx import Response
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import Connection, select

from app.models import Base
from tests.conftest import ApiUser

MB2 = 2 * 1024 * 1024

CAMPAIGN = {
    "title": "Spring news",
    "subject": "What is new",
    "html": "<p>Hello</p>",
    "from_name": "Ann",
    "from_email": "ann@example.com",
}
EMAIL = {"subject": "Welcome", "html": "<p>Hi</p>", "from_name": "Ann", "from_email": "ann@example.com"}


@dataclass
class World:
    """One of each resource, so a route's garbage reaches its validation instead of a 404."""

    user: ApiUser
    connection: Connection
    list_id: int
    contact_id: int
    campaign_id: int
    automation_id: int
    item_id: int

    @property
    def headers(self) -> dict[str, str]:
        return self.user.headers

    def fill(self, value: Any) -> Any:
        """Put the world's ids in place of the markers `<list>`, `<campaign>`, ... of a body or path."""
        if isinstance(value, dict):
            return {k: self.fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        if isinstance(value, str) and value in self.markers:
            return self.markers[value]
        if isinstance(value, str):
            for marker, row_id in self.markers.items():
                value = value.replace(marker, str(row_id))
        return value

    @property
    def markers(self) -> dict[str, int]:
        return {
            "<list>": self.list_id,
            "<contact>": self.contact_id,
            "<campaign>": self.campaign_id,
            "<automation>": self.automation_id,
            "<item>": self.item_id,
        }


@pytest.fixture
def world(client: TestClient, api_user: ApiUser, connection: Connection) -> World:
    headers = api_user.headers
    newsletter = client.post("/lists", json={"name": "Main"}, headers=headers)
    assert newsletter.status_code == 200, newsletter.text
    list_id = newsletter.json()["id"]
    contact = client.post(
        "/contacts",
        json={"email": "kept@example.com", "first_name": "Kept", "lists": [list_id]},
        headers=headers,
    )
    assert contact.status_code == 200, contact.text
    campaign = client.post("/campaigns", json=CAMPAIGN, headers=headers)
    assert campaign.status_code == 201, campaign.text
    automation = client.post("/automations", json={"title": "Flow"}, headers=headers)
    assert automation.status_code == 201, automation.text
    automation_id = automation.json()["id"]
    item = client.post(f"/automations/{automation_id}/emails", json=EMAIL, headers=headers)
    assert item.status_code == 201, item.text
    return World(
        user=api_user,
        connection=connection,
        list_id=list_id,
        contact_id=contact.json()["id"],
        campaign_id=campaign.json()["id"],
        automation_id=automation_id,
        item_id=item.json()["id"],
    )


# Personal tokens aside (a token's last use is recorded), every table the email API writes.
SNAPSHOT_TABLES = [table for table in Base.metadata.sorted_tables if table.name != "personal_tokens"]


def snapshot(client: TestClient, world: World) -> dict[str, Any]:
    """Every row of every table, timestamps included, read on the test's own connection (so it sees
    what a request left behind, committed or not): equal before and after a rejected request."""
    contacts = client.get("/contacts", headers=world.headers)
    assert contacts.status_code == 200, contacts.text
    rows = {
        table.name: [
            tuple(row) for row in world.connection.execute(select(table).order_by(*table.primary_key.columns))
        ]
        for table in SNAPSHOT_TABLES
    }
    return {"GET /contacts total": contacts.json()["total"], **rows}


def assert_error(response: Response, status: int, *, validation: bool = False) -> dict[str, Any]:
    """The status, and the email API's error body: a string message; on validation, errors by field."""
    assert response.status_code < 500, f"server error {response.status_code}: {response.text[:500]}"
    assert response.status_code == status, (
        f"expected {status}, got {response.status_code}: {response.text[:500]}"
    )
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert isinstance(body, dict)
    assert isinstance(body.get("message"), str)
    assert body["message"]
    if validation:
        errors = body.get("errors")
        assert isinstance(errors, dict), body
        assert errors, body
        for key, messages in errors.items():
            assert isinstance(key, str)
            assert key
            assert isinstance(messages, list), body
            assert messages, body
            assert all(isinstance(m, str) and m for m in messages), body
    else:
        assert "errors" not in body, body
    return body


def error_keys_name(body: dict[str, Any], *fields: str) -> bool:
    """Some error key is one of `fields` or a path below one (`lists.0`, `contacts.0.email`)."""
    return any(key == f or key.startswith(f + ".") for key in body["errors"] for f in fields)


# ------------------------------------------------------------------------------------------ the routes

TEXT = "text"  # a string field: numbers are wrong too
NAME = "name"  # first_name, last_name, a field value: numbers are read as text
EMAIL_FIELD = "email"
CONTACT_EMAIL = "contact_email"  # also the contact's key, lowercased
IP = "ip"
IDS = "ids"
ID = "id"
BOOL = "bool"
DELAY = "delay"
ORDER = "order"
DATETIME = "datetime"
TIMEZONE = "timezone"
TRIGGER = "trigger"
FIELDS = "contact_fields"
CONTACTS = "contacts"
SUBJECT = "subject"
HTML = "html"

TOO_LONG_EMAIL = "x" * 190 + "@example.com"
WRONG_VALUES: dict[str, list[Any]] = {
    TEXT: [123, 1.5, True, {}, [], ["a"], {"a": "b"}, "x" * 192],
    HTML: [123, 1.5, True, {}, [], ["a"], {"a": "b"}, "x" * 1_000_001],
    SUBJECT: [123, True, {}, ["a"], "x" * 192, "RE: hello", "re: hello", "FWD: hello", "Fwd:x"],
    NAME: [True, False, {}, [], ["a"], {"a": "b"}, "x" * 192],
    EMAIL_FIELD: [
        123,
        True,
        {},
        [],
        ["a@example.com"],
        "not-an-email",
        "a@",
        "@example.com",
        "a b@example.com",
        "a@@example.com",
        TOO_LONG_EMAIL,
    ],
    # 186 characters, but 246 once lowercased ('İ' becomes two): too long for the contact's key.
    CONTACT_EMAIL: ["İ" * 60 + "@" + "a" * 60 + "." + "b" * 60 + ".com"],
    IP: [123, True, {}, [], "999.1.1.1", "localhost", "1.2.3", "fe80::1%" + "a" * 60],
    IDS: ["abc", "1,x", [1.5], ["x"], [{}], [[1]], {"a": {}}, [0], [-1], [2**31], [10**20], [999_999_999]],
    ID: ["abc", 1.5, {}, [], 0, -1, 2**31, 10**20, 999_999_999],
    BOOL: ["maybe", 2, -1, 1.5, {}, [], "2"],
    DELAY: ["abc", 1.5, {}, [], -1, 5001, 10**20],
    ORDER: [0, -1, "abc", 1.5, {}, []],
    DATETIME: [
        "not a date",
        "2030-13-45T00:00:00",
        "2030-02-30",
        {},
        [],
        10**20,
        "0001-01-01T00:00:00+14:00",  # before year 1 once in UTC
        "9999-12-31T23:59:59-12:00",  # after year 9999 once in UTC
        "0001-01-01T00:00:00",  # wall-clock time in Europe/Oslo: also before year 1
    ],
    TIMEZONE: ["Mars/Olympus", "../../etc/passwd", 123, {}, [], "UTC\x00"],
    TRIGGER: ["bogus", "APPLY_LIST", 1, {}, []],
    FIELDS: [
        "city",
        [1],
        [{"value": "x"}],
        [{"name": {}}],
        [{"name": "x" * 192}],
        [{"name": "a", "value": {}}],
        [{"name": "a", "value": "v" * 65536}],
        {"name": 1},
    ],
    CONTACTS: [
        "x",
        {},
        1,
        [1],
        [{}],
        [{"email": "bad"}],
        [[]],
        {"email": "a@example.com"},
        [{"email": f"c{i}@example.com"} for i in range(1001)],
    ],
}


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    status: int  # SendFox's status for a validation failure
    success: int
    valid: dict[str, Any]  # a body the route accepts, with markers for the world's ids
    fields: tuple[tuple[str, str], ...]  # (field path, kind) to send wrong values in
    key: str  # a string field: PHP bracket garbage put there must be refused

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


CONTACT_BODY = {
    "email": "new@example.com",
    "first_name": "New",
    "last_name": "Person",
    "ip_address": "192.0.2.1",
    "lists": ["<list>"],
    "contact_fields": [{"name": "city", "value": "Oslo"}],
}
SCHEDULED = {"scheduled_at": "2030-01-01T10:00:00", "timezone": "Europe/Oslo", "lists": ["<list>"]}

ROUTES = [
    Route(
        "POST",
        "/contacts",
        400,
        200,
        CONTACT_BODY,
        (
            ("email", CONTACT_EMAIL),
            ("first_name", NAME),
            ("last_name", NAME),
            ("ip_address", IP),
            ("lists", IDS),
            ("contact_fields", FIELDS),
        ),
        "email",
    ),
    Route(
        "PATCH",
        "/contacts/<contact>",
        422,
        200,
        {k: v for k, v in CONTACT_BODY.items() if k not in ("email", "ip_address")},
        (("first_name", NAME), ("last_name", NAME), ("lists", IDS), ("contact_fields", FIELDS)),
        "first_name",
    ),
    Route(
        "POST",
        "/contacts/batch",
        422,
        200,
        {"contacts": [CONTACT_BODY, {"email": "second@example.com"}]},
        (
            ("contacts", CONTACTS),
            ("contacts.0.email", CONTACT_EMAIL),
            ("contacts.1.first_name", NAME),
            ("contacts.0.ip_address", IP),
            ("contacts.0.lists", IDS),
            ("contacts.1.contact_fields", FIELDS),
        ),
        "contacts",
    ),
    Route(
        "PATCH", "/unsubscribe", 400, 200, {"email": "kept@example.com"}, (("email", CONTACT_EMAIL),), "email"
    ),
    Route("POST", "/lists", 400, 200, {"name": "Another"}, (("name", TEXT),), "name"),
    Route(
        "POST",
        "/suppressions",
        422,
        200,
        {"email": "stop@example.com"},
        (("email", CONTACT_EMAIL),),
        "email",
    ),
    Route(
        "POST",
        "/campaigns",
        422,
        201,
        {**CAMPAIGN, **SCHEDULED},
        (
            ("title", TEXT),
            ("subject", SUBJECT),
            ("html", HTML),
            ("from_name", TEXT),
            ("from_email", EMAIL_FIELD),
            ("scheduled_at", DATETIME),
            ("timezone", TIMEZONE),
            ("lists", IDS),
        ),
        "title",
    ),
    Route(
        "PATCH",
        "/campaigns/<campaign>",
        422,
        200,
        {**CAMPAIGN, **SCHEDULED, "title": "Edited"},
        (
            ("title", TEXT),
            ("subject", SUBJECT),
            ("html", HTML),
            ("from_name", TEXT),
            ("from_email", EMAIL_FIELD),
            ("scheduled_at", DATETIME),
            ("timezone", TIMEZONE),
            ("lists", IDS),
        ),
        "title",
    ),
    Route(
        "POST",
        "/automations",
        422,
        201,
        {"title": "Welcome", "trigger_type": "apply_list", "trigger_list_id": "<list>", "active": True},
        (("title", TEXT), ("trigger_type", TRIGGER), ("trigger_list_id", ID), ("active", BOOL)),
        "title",
    ),
    Route(
        "PATCH",
        "/automations/<automation>",
        422,
        200,
        {
            "title": "Renamed",
            "active": True,
            "trigger_type": "open_campaign",
            "trigger_campaign_id": "<campaign>",
        },
        (("title", TEXT), ("active", BOOL), ("trigger_type", TRIGGER), ("trigger_campaign_id", ID)),
        "title",
    ),
    Route(
        "POST",
        "/automations/<automation>/emails",
        422,
        201,
        {**EMAIL, "delay_hours": 5},
        (
            ("subject", SUBJECT),
            ("html", HTML),
            ("from_name", TEXT),
            ("from_email", EMAIL_FIELD),
            ("delay_hours", DELAY),
        ),
        "subject",
    ),
    Route(
        "PATCH",
        "/automation-emails/<item>",
        422,
        200,
        {**EMAIL, "subject": "Edited", "delay_hours": 6, "send_order": 1},
        (
            ("subject", SUBJECT),
            ("html", HTML),
            ("from_name", TEXT),
            ("from_email", EMAIL_FIELD),
            ("delay_hours", DELAY),
            ("send_order", ORDER),
        ),
        "subject",
    ),
]
ROUTE_IDS = [str(route) for route in ROUTES]
ALL_FIELDS = sorted({path.split(".")[-1] for route in ROUTES for path, _ in route.fields} | {"contacts"})


def send(
    client: TestClient,
    world: World,
    route: Route,
    *,
    body: Any = None,
    content: bytes | str | None = None,
    content_type: str | None = None,
    query: str = "",
) -> Response:
    url = world.fill(route.path) + (f"?{query}" if query else "")
    headers = dict(world.headers)
    if content_type is not None:
        headers["Content-Type"] = content_type
    if body is not None:
        return client.request(route.method, url, json=body, headers=headers)
    return client.request(route.method, url, content=content, headers=headers)


def php_encode(value: Any, prefix: str = "") -> str:
    """A body as a form or query string in PHP's bracket syntax (`lists[0]=1&contact_fields[0][name]=x`)."""
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        text = ("1" if value else "0") if isinstance(value, bool) else str(value)
        return f"{quote(prefix, safe='[]')}={quote(text, safe='')}"
    return "&".join(php_encode(v, f"{prefix}[{k}]" if prefix else str(k)) for k, v in items)


def with_value(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `body` with the value at a dotted path (`contacts.0.email`) replaced."""
    changed = copy.deepcopy(body)
    node: Any = changed
    *parents, last = path.split(".")
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[last] = value
    return changed


# --------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
def test_the_valid_body_is_accepted_with_unknown_bracket_keys_beside_it(
    client: TestClient, world: World, route: Route
) -> None:
    """The baseline every garbage test changes one thing of: it must succeed, or they prove nothing.
    PHP bracket keys of odd shapes under names no route reads change nothing about that."""
    response = send(client, world, route, body=world.fill(route.valid))
    assert response.status_code == route.success, response.text
    response = send(client, world, route, body=world.fill(route.valid), query=UNKNOWN_BRACKET_KEYS)
    assert response.status_code == route.success, response.text


UNREADABLE_BODIES: list[tuple[str, bytes, str | None]] = [
    ("truncated JSON", b'{"email": "a@example.com", "name": ', "application/json"),
    ("single quotes", b"{'email': 'a@example.com'}", "application/json"),
    ("trailing comma", b'{"email": "a@example.com",}', "application/json"),
    ("trailing garbage", b'{"email": "a@example.com"} and more', "application/json"),
    ("binary", b"\xff\xfe\x00\x01garbage\x80", "application/json"),
    ("invalid UTF-8 in a string", b'{"email": "a\xff@example.com", "name": "\xc3\x28"}', "application/json"),
    ("no content type", b'{"email": ', None),
    ("array", b'[{"email": "a@example.com", "name": "x"}]', "application/json"),
    ("empty array", b"[]", "application/json"),
    ("number", b"42", "application/json"),
    ("huge number", b"1" * 5000, "application/json"),
    ("string", b'"email=a@example.com"', "application/json"),
    ("null", b"null", "application/json"),
    ("boolean", b"true", "application/json"),
    ("NaN", b"NaN", "application/json"),
    ("10,000 nested arrays", b"[" * 10_000 + b"]" * 10_000, "application/json"),
    ("10,000 nested objects", b'{"a":' * 10_000 + b"1" + b"}" * 10_000, "application/json"),
    ("500 nested arrays in a field", b'{"email": ' + b"[" * 500 + b"]" * 500 + b"}", "application/json"),
    ("text/plain", b'{"email": "a@example.com", "name": "x"}', "text/plain"),
    ("application/xml", b"<contact><email>a@example.com</email></contact>", "application/xml"),
    ("octet-stream", bytes(range(256)), "application/octet-stream"),
    ("multipart without boundary", b"garbage", "multipart/form-data"),
    ("multipart garbage", b"--xyz\r\ngarbage\r\n\r\n--xy", "multipart/form-data; boundary=xyz"),
    (
        "multipart part without name",
        b"--xyz\r\nContent-Disposition: form-data\r\n\r\nvalue\r\n--xyz--\r\n",
        "multipart/form-data; boundary=xyz",
    ),
    ("over 8 MB", b'{"padding": "' + b"x" * (8 * 1024 * 1024) + b'"}', "application/json"),
]


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
def test_an_unreadable_body_is_refused_and_writes_nothing(
    client: TestClient, world: World, route: Route
) -> None:
    before = snapshot(client, world)
    for label, content, content_type in UNREADABLE_BODIES:
        response = send(client, world, route, content=content, content_type=content_type)
        try:
            body = assert_error(response, route.status, validation=True)
        except AssertionError as exc:
            raise AssertionError(f"{label}: {exc}") from exc
        assert list(body["errors"]) == ["body"], f"{label}: {body}"
    assert snapshot(client, world) == before


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
def test_a_wrong_value_in_each_field_is_refused_and_writes_nothing(
    client: TestClient, world: World, route: Route
) -> None:
    base = world.fill(route.valid)
    before = snapshot(client, world)
    for path, kind in route.fields:
        # Where a batch's list ids are checked together, the error names the batch's `lists`.
        names = (path, "lists") if path.endswith(".lists") else (path,)
        values = WRONG_VALUES[kind] + (WRONG_VALUES[EMAIL_FIELD] if kind == CONTACT_EMAIL else [])
        for value in values:
            shown = repr(value)[:80]
            response = send(client, world, route, body=with_value(base, path, value))
            try:
                body = assert_error(response, route.status, validation=True)
            except AssertionError as exc:
                raise AssertionError(f"{path}={shown}: {exc}") from exc
            assert error_keys_name(body, *names), f"{path}={shown}: {body}"
    assert snapshot(client, world) == before


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
def test_huge_and_deeply_nested_values_are_refused(client: TestClient, world: World, route: Route) -> None:
    base = world.fill(route.valid)
    huge = "x" * MB2
    before = snapshot(client, world)

    def refused(path: str, value: Any) -> dict[str, Any]:
        return assert_error(
            send(client, world, route, body=with_value(base, path, value)), route.status, validation=True
        )

    # 2 MB in the route's first string field, in html, and in a custom field's name and value.
    key_path = next(p for p, kind in route.fields if p.split(".")[-1] == route.key or kind == CONTACTS)
    big_fields = [key_path, *(p for p, kind in route.fields if kind == HTML)]
    for path in big_fields:
        assert error_keys_name(refused(path, huge), path), path
    for path in (p for p, kind in route.fields if kind == FIELDS):
        for field in ({"name": huge, "value": "v"}, {"name": "big", "value": huge}):
            assert error_keys_name(refused(path, [field]), path), field["name"][:10]
    # Whitespace only is trimmed to nothing: a required field is then missing.
    if route.method == "POST" and route.key != "contacts":
        assert error_keys_name(refused(route.key, " " * MB2), route.key)

    # Within the depth limit a nested value is a wrong type for its field; past it, the body is refused.
    path, _ = route.fields[0]
    for depth in (2, 31, 33, 500):
        in_lists: Any = "x"
        in_objects: Any = "x"
        for _ in range(depth):
            in_lists = [in_lists]
            in_objects = {"a": in_objects}
        for value in (in_lists, in_objects):
            body = refused(path, value)
            if depth + path.count(".") + 1 > 32:
                assert list(body["errors"]) == ["body"], (depth, body)
            else:
                assert error_keys_name(body, path), (depth, body)
    assert snapshot(client, world) == before


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
def test_nul_and_unpaired_surrogates_are_refused(client: TestClient, world: World, route: Route) -> None:
    """PostgreSQL cannot store NUL, and a lone surrogate is not text: both are refused on either database."""
    base = world.fill(route.valid)
    before = snapshot(client, world)
    text_fields = [
        path for path, kind in route.fields if kind in (TEXT, HTML, SUBJECT, NAME, EMAIL_FIELD, CONTACT_EMAIL)
    ]
    for path in text_fields:
        for value in ("a\x00b", "\x00", "ok\x00@example.com"):
            body = assert_error(
                send(client, world, route, body=with_value(base, path, value)), route.status, validation=True
            )
            assert error_keys_name(body, path), f"{path}={value!r}: {body}"
        # json.dumps writes a lone surrogate as the escape \ud800, which json.loads reads back as one.
        raw = json.dumps(with_value(base, path, "a\ud800b"))
        body = assert_error(
            send(client, world, route, content=raw, content_type="application/json"),
            route.status,
            validation=True,
        )
        assert error_keys_name(body, path), f"{path}: {body}"
    # The same through the query string and a form body, for the route's key field.
    if route.key != "contacts":
        rest = {k: v for k, v in base.items() if k != route.key}
        for query in (f"{route.key}=a%00b", f"{route.key}=%00"):
            body = assert_error(
                send(client, world, route, body=rest, query=query), route.status, validation=True
            )
            assert list(body["errors"]) == [route.key], body
        form = "&".join([php_encode(rest), f"{route.key}=a%00b"])
        body = assert_error(
            send(client, world, route, content=form, content_type="application/x-www-form-urlencoded"),
            route.status,
            validation=True,
        )
        assert list(body["errors"]) == [route.key], body
    assert snapshot(client, world) == before


def test_a_nul_in_contact_fields_is_refused(client: TestClient, world: World) -> None:
    before = snapshot(client, world)
    for field in ({"name": "ci\x00ty", "value": "Oslo"}, {"name": "city", "value": "Os\x00lo"}):
        body = assert_error(
            client.post(
                "/contacts",
                json={"email": "nul@example.com", "contact_fields": [field]},
                headers=world.headers,
            ),
            400,
            validation=True,
        )
        assert error_keys_name(body, "contact_fields"), body
    assert snapshot(client, world) == before


UNICODE_TEXT = "Ünïcødé 😀 \u202eevil\u202c العربية 漢字 \u200b\u0301e"


def test_unicode_is_stored_and_returned_unchanged(client: TestClient, world: World) -> None:
    headers = world.headers
    made = client.post("/lists", json={"name": UNICODE_TEXT}, headers=headers)
    assert made.status_code == 200, made.text
    assert made.json()["name"] == UNICODE_TEXT
    assert client.get(f"/lists/{made.json()['id']}", headers=headers).json()["name"] == UNICODE_TEXT

    contact = client.post(
        "/contacts",
        json={
            "email": "josé@exämple.com",
            "first_name": "😀" * 191,  # 191 characters, more bytes: still within the limit
            "last_name": UNICODE_TEXT,
            "contact_fields": [{"name": "städt", "value": UNICODE_TEXT}],
        },
        headers=headers,
    )
    assert contact.status_code == 200, contact.text
    stored = client.get(f"/contacts/{contact.json()['id']}", headers=headers).json()
    assert stored["email"] == "josé@exämple.com"
    assert stored["first_name"] == "😀" * 191
    assert stored["last_name"] == UNICODE_TEXT
    found = client.get("/contacts", params={"email": "JOSÉ@EXÄMPLE.COM"}, headers=headers).json()
    assert [c["id"] for c in found["data"]] == [stored["id"]]

    too_long = client.post(
        "/contacts", json={"email": "emoji@example.com", "first_name": "😀" * 192}, headers=headers
    )
    assert error_keys_name(assert_error(too_long, 400, validation=True), "first_name")

    campaign = client.post(
        "/campaigns", json={**CAMPAIGN, "subject": "Ünïcødé 😀", "html": UNICODE_TEXT * 100}, headers=headers
    )
    assert campaign.status_code == 201, campaign.text
    assert campaign.json()["html"] == UNICODE_TEXT * 100


SQL_FRAGMENTS = [
    "'; DROP TABLE contacts; --",
    "Robert'); DROP TABLE contact_lists;--",
    "' OR '1'='1",
    '" OR ""="',
    "1; SELECT pg_sleep(10)",
    "%' UNION SELECT email FROM users --",
]


def test_sql_fragments_are_stored_verbatim_and_match_nothing(client: TestClient, world: World) -> None:
    headers = world.headers
    for fragment in SQL_FRAGMENTS:
        made = client.post("/lists", json={"name": fragment}, headers=headers)
        assert made.status_code == 200, made.text
        assert made.json()["name"] == fragment
        contact = client.post(
            "/contacts",
            json={"email": "o'brien@example.com", "first_name": fragment, "last_name": fragment},
            headers=headers,
        )
        assert contact.status_code == 200, contact.text
        assert contact.json()["first_name"] == fragment
        automation = client.post("/automations", json={"title": fragment}, headers=headers)
        assert automation.status_code == 201, automation.text
        assert automation.json()["title"] == fragment
    lists = client.get("/lists", headers=headers).json()
    assert [item["name"] for item in lists["data"]] == ["Main", *SQL_FRAGMENTS]
    contacts = client.get("/contacts", headers=headers).json()
    assert contacts["total"] == 2
    assert {c["email"] for c in contacts["data"]} == {"kept@example.com", "o'brien@example.com"}
    for fragment in ("' OR 1=1 --", "x' OR 'x'='x"):
        assert client.get("/contacts", params={"email": fragment}, headers=headers).json()["total"] == 0
        assert client.get("/contacts", params={"query": fragment}, headers=headers).json()["total"] == 0
    by_email = client.get("/contacts", params={"email": "O'BRIEN@example.com"}, headers=headers).json()
    assert by_email["total"] == 1


def bracket_shapes(key: str) -> list[str]:
    """PHP bracket keys of odd shapes, all of which make `key` something other than a string."""
    return [
        f"{key}[][][]=1",
        f"{key}[x]=1&{key}=2",
        f"{key}=2&{key}[x]=1",
        f"{key}[]=a&{key}[]=b",
        f"{key}=a&{key}=b",
        f"{key}[0]=a&{key}[x]=b",
        f"{key}[0][1][2][3][4][5][6][7][8][9]=1",
        key + "[a]" * 1000 + "=1",
        key + "[" * 1000 + "]" * 1000 + "=1",
        key + "[]" * 1000 + "=1",
        f"{key}[%C2%B2]=1",  # '²' is a digit to str.isdigit, not to int()
        f"{key}[%D9%A1]=1",  # ARABIC-INDIC DIGIT ONE
        f"{key}[" + "9" * 5000 + "]=1",  # more digits than int() reads
        f"{key}[99999999999999999999]=1",
        f"{key}[-1]=1",
    ]


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
def test_php_bracket_keys_of_odd_shapes_are_refused(client: TestClient, world: World, route: Route) -> None:
    """The shapes land on a field that wants a string (or, for the batch, objects): always refused."""
    before = snapshot(client, world)
    for n, shape in enumerate(bracket_shapes(route.key)):
        # Form bodies go through the same reader as the query string: a few shapes suffice there.
        for as_form in (False, True) if n % 3 == 0 else (False,):
            if as_form:
                response = send(
                    client,
                    world,
                    route,
                    content=shape,
                    content_type="application/x-www-form-urlencoded",
                )
            else:
                response = send(client, world, route, query=shape)
            where = f"{'form' if as_form else 'query'} {shape[:60]}"
            try:
                body = assert_error(response, route.status, validation=True)
            except AssertionError as exc:
                raise AssertionError(f"{where}: {exc}") from exc
            assert error_keys_name(body, route.key), f"{where}: {body}"
    assert snapshot(client, world) == before


UNKNOWN_BRACKET_KEYS = "&".join(
    [
        "a[][][]=1",
        "a[x]=1",
        "a=2",
        "b" + "[c]" * 1000 + "=1",
        "d" + "[" * 1000 + "]" * 1000 + "=1",
        "[]=1",
        "[x]=2",
        "=3",
        "e[=4",
        "f]=5",
        "g[%C2%B2]=6",
        "h[" + "9" * 5000 + "]=7",
        "%00=%00",
        "&&",
    ]
)


BAD_IDS = [
    "abc",
    "1.5",
    "1e3",
    "-1",
    "0",
    "%00",
    "1%3BDROP%20TABLE%20contacts",
    "%D9%A1",  # ARABIC-INDIC DIGIT ONE
    "%EF%BC%91",  # FULLWIDTH DIGIT ONE
    str(2**31 - 1),  # in range, names nothing
    str(2**31),
    str(2**63),
    "99999999999999999999",
    "9" * 400,
]
ID_ROUTES = [
    ("GET", "/contacts/{}"),
    ("PATCH", "/contacts/{}"),
    ("DELETE", "/contacts/{}"),
    ("GET", "/contacts/{}/activity"),
    ("GET", "/lists/{}"),
    ("DELETE", "/lists/{}"),
    ("GET", "/lists/{}/contacts"),
    ("DELETE", "/lists/{}/contacts/<contact>"),
    ("DELETE", "/lists/<list>/contacts/{}"),
    ("GET", "/campaigns/{}"),
    ("PATCH", "/campaigns/{}"),
    ("DELETE", "/campaigns/{}"),
    ("POST", "/campaigns/{}/send"),
    ("GET", "/campaigns/{}/stats"),
    ("GET", "/automations/{}"),
    ("PATCH", "/automations/{}"),
    ("DELETE", "/automations/{}"),
    ("POST", "/automations/{}/emails"),
    ("PATCH", "/automation-emails/{}"),
    ("GET", "/forms/{}"),
]


ID_RESOURCES = ["/contacts", "/lists", "/campaigns", "/automation", "/forms"]


@pytest.mark.parametrize("resource", ID_RESOURCES)
def test_an_id_that_is_not_a_row_id_is_404(client: TestClient, world: World, resource: str) -> None:
    before = snapshot(client, world)
    routes = [(method, template) for method, template in ID_ROUTES if template.startswith(resource)]
    assert routes
    for method, template in routes:
        for bad in BAD_IDS:
            url = world.fill(template.replace("{}", bad))
            # A body that would be valid, so only the id can be what is wrong.
            response = client.request(method, url, json={"title": "x", **EMAIL}, headers=world.headers)
            try:
                assert_error(response, 404)
            except AssertionError as exc:
                raise AssertionError(f"{method} {url[:80]}: {exc}") from exc
    assert snapshot(client, world) == before


def test_send_reads_no_body(client: TestClient, world: World) -> None:
    """POST /campaigns/{id}/send takes no input: garbage of any kind changes nothing about the answer."""
    url = f"/campaigns/{world.campaign_id}/send"
    before = snapshot(client, world)
    for label, content, content_type in UNREADABLE_BODIES:
        response = client.post(
            url + "?lists[][]=1",
            content=content,
            headers={**world.headers, "Content-Type": content_type or ""},
        )
        try:
            body = assert_error(response, 400)  # the draft has no lists: SendFox's 400
        except AssertionError as exc:
            raise AssertionError(f"{label}: {exc}") from exc
        assert "list" in body["message"]
    assert snapshot(client, world) == before

    patched = client.patch(
        f"/campaigns/{world.campaign_id}", json={"lists": [world.list_id]}, headers=world.headers
    )
    assert patched.status_code == 200, patched.text
    sent = client.post(
        url + "?scheduled_at=nonsense",
        content=b"\x00\xff[[[",
        headers={**world.headers, "Content-Type": "text/plain"},
    )
    assert sent.status_code == 200, sent.text
    assert sent.json()["scheduled_at"] is not None
    again = client.post(url, json=[1, 2, 3], headers=world.headers)
    assert_error(again, 409)


DELETE_ROUTES = [
    ("/contacts/<contact>", "/contacts/<contact>"),
    ("/lists/<list>/contacts/<contact>", "/lists/<list>/contacts"),
    ("/campaigns/<campaign>", "/campaigns/<campaign>"),
    ("/automations/<automation>", "/automations/<automation>"),
]


@pytest.mark.parametrize(("path", "check"), DELETE_ROUTES, ids=[p for p, _ in DELETE_ROUTES])
def test_delete_reads_no_body_or_query(client: TestClient, world: World, path: str, check: str) -> None:
    url = world.fill(path) + "?" + UNKNOWN_BRACKET_KEYS + "&id[]=1&id=abc"
    response = client.request(
        "DELETE", url, content=b"[[[[\x00\xff", headers={**world.headers, "Content-Type": "application/json"}
    )
    assert response.status_code == 200, response.text
    assert isinstance(response.json(), dict)
    if check.endswith("/contacts"):
        assert client.get(world.fill(check), headers=world.headers).json()["total"] == 0
    else:
        assert_error(client.get(world.fill(check), headers=world.headers), 404)
    assert_error(client.request("DELETE", url, json={"x": 1}, headers=world.headers), 404)


def test_delete_list_in_use_with_garbage_is_still_409(client: TestClient, world: World) -> None:
    made = client.post(
        "/automations",
        json={"title": "Uses it", "trigger_type": "apply_list", "trigger_list_id": world.list_id},
        headers=world.headers,
    )
    assert made.status_code == 201, made.text
    response = client.request(
        "DELETE", f"/lists/{world.list_id}?force=1&usages[]=x", content=b"{{{", headers=world.headers
    )
    body = assert_error(response, 409)
    assert isinstance(body["usages"], list)
    assert body["usages"][0]["type"] == "automation"


BAD_CREDENTIALS: list[dict[str, str | bytes]] = [
    {},
    {"Authorization": ""},
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer "},
    {"Authorization": "Bearer tdg_"},
    {"Authorization": "Basic dXNlcjpwYXNz"},
    {"Authorization": "Bearer tdg_' OR '1'='1"},
    {"Authorization": "Bearer " + "tdg_" + "x" * 10_000},
    {"Authorization": b"Bearer tdg_\xe9\xff"},
    {"Authorization": "Bearer tdg_a Bearer tdg_b"},
]


def test_garbage_credentials_are_401_and_write_nothing(client: TestClient, world: World) -> None:
    before = snapshot(client, world)
    for route in ROUTES:
        for headers in BAD_CREDENTIALS:
            response = client.request(
                route.method, world.fill(route.path), json=world.fill(route.valid), headers=headers
            )
            assert assert_error(response, 401) == {"message": "Unauthenticated."}, (str(route), headers)
    assert snapshot(client, world) == before


def test_garbage_filters_on_list_routes(client: TestClient, world: World) -> None:
    """Not write routes, but the same input reader: a filter of the wrong shape is a 422, never a 5xx."""
    headers = world.headers
    for path in (
        "/contacts",
        "/contacts/unsubscribed",
        "/lists",
        f"/lists/{world.list_id}/contacts",
        "/forms",
    ):
        for query in ("query[]=x", "query[a][b]=1&query=2", "query=%00", "query" + "[x]" * 1000 + "=1"):
            body = assert_error(client.get(f"{path}?{query}", headers=headers), 422, validation=True)
            assert error_keys_name(body, "query"), f"{path}?{query[:40]}: {body}"
        for page in ("abc", "-5", "0", "1.5", "99999999999999999999", "9" * 5000):
            response = client.get(path, params={"page": page}, headers=headers)
            assert response.status_code == 200, f"{path}?page={page[:20]}: {response.text[:300]}"
            assert response.json()["current_page"] >= 1
    for query in ("unsubscribed=maybe", "unsubscribed[]=1", "email[x]=1"):
        body = assert_error(client.get(f"/contacts?{query}", headers=headers), 422, validation=True)
        assert error_keys_name(body, query.split("[")[0].split("=")[0]), body
    for query in ("query=%25", "query=_", "query=%5C", "email=%25"):
        assert client.get(f"/contacts?{query}", headers=headers).status_code == 200


# ------------------------------------------------------------------------------- property: no 5xx ever

SPECIAL_TEXT = st.sampled_from(
    [
        "",
        "   ",
        "\x00",
        "a\x00b",
        "\ud800",
        "RE: hi",
        "FWD: x",
        "' OR 1=1 --",
        "İ" * 120,
        "😀" * 200,
        "x" * 192,
        "new@example.com",
        "KEPT@example.com",
        "bad@",
        "apply_list",
        "open_campaign",
        "click_campaign",
        "Europe/Oslo",
        "Mars/Base",
        "2030-01-01T00:00:00Z",
        "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59-12:00",
        "1,2,x",
        "fe80::1%" + "a" * 50,
        "192.0.2.1",
        "true",
        "0",
        "-1",
        str(2**31),
        str(10**30),
    ]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=20)
    | SPECIAL_TEXT
)
FIELD_NAMES = st.sampled_from([*ALL_FIELDS, "name", "value"])
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(FIELD_NAMES | st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=16,
)
PROPERTY_SETTINGS = hypothesis_settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def assert_no_server_error(response: Response, route: Route, sent: Any) -> None:
    assert response.status_code < 500, f"{route} {sent!r:.300}: {response.status_code} {response.text[:300]}"
    body = response.json()
    assert isinstance(body, dict)
    if response.status_code >= 400:
        assert isinstance(body.get("message"), str), body
        assert response.status_code not in (401, 403), body
        if "errors" in body:
            assert all(
                isinstance(k, str) and isinstance(v, list) and all(isinstance(m, str) for m in v)
                for k, v in body["errors"].items()
            ), body
        if response.status_code == route.status:
            assert isinstance(body.get("errors"), dict), body


@PROPERTY_SETTINGS
@given(route=st.sampled_from(ROUTES), data=st.data())
def test_random_json_bodies_never_give_a_server_error(
    client: TestClient, world: World, route: Route, data: st.DataObject
) -> None:
    ids = st.sampled_from([world.list_id, world.campaign_id, world.contact_id])
    values = JSON_VALUES | ids | st.lists(ids, max_size=3)
    body = data.draw(st.dictionaries(FIELD_NAMES | st.text(max_size=6), values, max_size=8), label="body")
    response = send(client, world, route, content=json.dumps(body), content_type="application/json")
    assert_no_server_error(response, route, body)


@PROPERTY_SETTINGS
@given(
    route=st.sampled_from(ROUTES),
    content=st.binary(max_size=300),
    content_type=st.sampled_from(
        [
            "application/json",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=b",
            "text/plain",
            "application/vnd.api+json",
            "",
        ]
    ),
    query=st.text(max_size=60),
)
def test_random_bytes_never_give_a_server_error(
    client: TestClient, world: World, route: Route, content: bytes, content_type: str, query: str
) -> None:
    response = send(client, world, route, content=content, content_type=content_type, query=quote(query))
    assert_no_server_error(response, route, (content, content_type, query))
