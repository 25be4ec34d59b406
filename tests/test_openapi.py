"""GET /openapi.yaml (the email API's description, equal to the committed openapi/mail.yaml and a valid
OpenAPI 3 document naming every route of SendFox's API), GET /healthz, and 404s for routes that do not
exist."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from openapi_spec_validator import validate

from tests.conftest import ApiUser

COMMITTED = Path(__file__).resolve().parent.parent / "openapi" / "mail.yaml"

# Every operation of SendFox's API 1.2.0 and the statuses it lists (401 and 429 apply to all of them).
SEED_OPERATIONS: dict[tuple[str, str], set[str]] = {
    ("get", "/contacts"): {"200", "401"},
    ("post", "/contacts"): {"200", "400", "402"},
    ("get", "/contacts/{id}"): {"200", "403", "404"},
    ("patch", "/contacts/{id}"): {"200", "403", "422"},
    ("delete", "/contacts/{id}"): {"200", "403", "404"},
    ("get", "/contacts/{id}/activity"): {"200", "403", "404"},
    ("post", "/contacts/batch"): {"200", "402", "422"},
    ("get", "/contacts/unsubscribed"): {"200"},
    ("patch", "/unsubscribe"): {"200", "400"},
    ("get", "/campaigns"): {"200"},
    ("post", "/campaigns"): {"201", "403", "422"},
    ("get", "/campaigns/{id}"): {"200", "403", "404"},
    ("patch", "/campaigns/{id}"): {"200", "403", "409", "422"},
    ("delete", "/campaigns/{id}"): {"200", "403", "409"},
    ("post", "/campaigns/{id}/send"): {"200", "400", "403", "409"},
    ("get", "/campaigns/{id}/stats"): {"200", "403", "404"},
    ("get", "/forms"): {"200", "401"},
    ("get", "/forms/{id}"): {"200", "403", "404"},
    ("get", "/me"): {"200", "401"},
    ("get", "/contact-fields"): {"200", "401"},
    ("get", "/lists"): {"200", "401"},
    ("post", "/lists"): {"200", "400", "401"},
    ("get", "/lists/{id}"): {"200", "403", "404"},
    ("delete", "/lists/{id}"): {"200", "403", "404", "409"},
    ("get", "/lists/{list_id}/contacts"): {"200", "403"},
    ("delete", "/lists/{list_id}/contacts/{contact_id}"): {"200", "403", "404"},
    ("get", "/automations"): {"200", "401"},
    ("post", "/automations"): {"201", "403", "422"},
    ("get", "/automations/{id}"): {"200", "401", "404"},
    ("patch", "/automations/{id}"): {"200", "403", "422"},
    ("delete", "/automations/{id}"): {"200", "403", "404"},
    ("post", "/automations/{id}/emails"): {"201", "403", "422"},
    ("patch", "/automation-emails/{id}"): {"200"},
}
WRITE_BODIES = {
    ("post", "/contacts"): ({"email"}, {"first_name", "last_name", "ip_address", "lists", "contact_fields"}),
    ("patch", "/contacts/{id}"): (set(), {"first_name", "last_name", "lists", "contact_fields"}),
    ("post", "/contacts/batch"): ({"contacts"}, set()),
    ("patch", "/unsubscribe"): ({"email"}, set()),
    ("post", "/lists"): ({"name"}, set()),
    ("post", "/campaigns"): (
        {"title", "subject", "html", "from_name", "from_email"},
        {"scheduled_at", "lists"},
    ),
    ("patch", "/campaigns/{id}"): (
        set(),
        {"title", "subject", "html", "from_name", "from_email", "scheduled_at", "lists"},
    ),
    ("post", "/automations"): (
        {"title"},
        {"trigger_type", "trigger_list_id", "trigger_campaign_id", "active"},
    ),
    ("patch", "/automations/{id}"): (
        set(),
        {"title", "active", "trigger_type", "trigger_list_id", "trigger_campaign_id"},
    ),
    ("post", "/automations/{id}/emails"): ({"subject", "html", "from_name", "from_email"}, {"delay_hours"}),
    ("patch", "/automation-emails/{id}"): (
        set(),
        {"subject", "html", "from_name", "from_email", "delay_hours", "send_order"},
    ),
}
HTTP_METHODS = {"get", "post", "put", "patch", "delete", "head", "options", "trace"}


@pytest.fixture
def served(client: TestClient) -> dict[str, Any]:
    response = client.get("/openapi.yaml")  # no credentials: the description is public
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/yaml")
    document = yaml.safe_load(response.text)
    assert isinstance(document, dict)
    return document


def operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method, path): operation
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in HTTP_METHODS
    }


def schema_of(document: dict[str, Any], ref_or_schema: dict[str, Any]) -> dict[str, Any]:
    ref = ref_or_schema.get("$ref")
    if ref is None:
        return ref_or_schema
    assert ref.startswith("#/components/schemas/"), ref
    return document["components"]["schemas"][ref.rsplit("/", 1)[1]]  # type: ignore[no-any-return]


def integer_member(schema: dict[str, Any]) -> dict[str, Any]:
    """The integer schema of an optional integer (`anyOf: [{type: integer, ...}, {type: null}]`)."""
    members = schema.get("anyOf", [schema])
    found = [m for m in members if m.get("type") == "integer"]
    assert len(found) == 1, schema
    return found[0]


def test_openapi_yaml_is_version_1_2_0_and_equals_the_committed_file(served: dict[str, Any]) -> None:
    assert served["info"]["version"] == "1.2.0"
    assert str(served["openapi"]).startswith("3.")
    committed = yaml.safe_load(COMMITTED.read_text(encoding="utf-8"))
    assert served == committed, "openapi/mail.yaml is stale: run `tidings openapi` and commit the result"


def test_openapi_yaml_is_a_valid_openapi_3_document(served: dict[str, Any]) -> None:
    validate(served)


def test_every_route_of_the_seed_is_described_with_its_statuses(served: dict[str, Any]) -> None:
    described = operations(served)
    missing = sorted(set(SEED_OPERATIONS) - set(described))
    assert not missing, f"not in /openapi.yaml: {missing}"
    for key, statuses in SEED_OPERATIONS.items():
        documented = set(described[key]["responses"])
        lacking = (statuses | {"401", "429"}) - documented
        assert not lacking, f"{key}: statuses {sorted(lacking)} not documented"
        # A malformed id is a 404 here, not FastAPI's 422: only the routes that read a body list 422.
        if "422" in documented:
            assert "422" in statuses or key in WRITE_BODIES, key


def test_every_described_route_is_served_and_wants_credentials(
    client: TestClient, served: dict[str, Any]
) -> None:
    """A described route that the app does not serve would be 404 or 405; each one is 401 without a token.
    The providers' webhooks (`security: []`) authenticate their own way, and are off in this app:
    tests/mail/sending/test_provider_webhooks.py checks them."""
    for (method, path), operation in operations(served).items():
        if operation.get("security") == []:
            continue
        url = re.sub(r"\{[a-z_]+\}", "1", path)
        response = client.request(method.upper(), url)
        assert response.status_code == 401, f"{method.upper()} {url}: {response.status_code} {response.text}"
        assert response.json() == {"message": "Unauthenticated."}


def test_write_bodies_list_the_seed_fields_and_path_ids_are_integers(served: dict[str, Any]) -> None:
    described = operations(served)
    for key, (required, optional) in WRITE_BODIES.items():
        body = described[key]["requestBody"]["content"]
        assert {"application/json", "application/x-www-form-urlencoded"} <= set(body), key
        schema = schema_of(served, body["application/json"]["schema"])
        assert set(schema.get("required", [])) == required, key
        assert required | optional <= set(schema["properties"]), key
    for (_, path), operation in described.items():
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "path":
                assert parameter["name"] in path
                # Account webhooks (beyond SendFox) are named by ULIDs, like the /v1 resources; a
                # suppression (beyond SendFox too) by its address.
                expected = "string" if parameter["name"] in ("webhook_id", "email") else "integer"
                assert parameter["schema"]["type"] == expected, (path, parameter)
    schemas = served["components"]["schemas"]
    assert schemas["ContactBatch"]["properties"]["contacts"]["maxItems"] == 1000
    for model in ("AutomationEmailCreate", "AutomationEmailUpdate"):
        delay = integer_member(schemas[model]["properties"]["delay_hours"])
        assert (delay["minimum"], delay["maximum"]) == (0, 5000), model
    assert integer_member(schemas["AutomationEmailUpdate"]["properties"]["send_order"])["minimum"] == 1


def test_bearer_authentication_and_pagination_are_described(served: dict[str, Any]) -> None:
    assert served["components"]["securitySchemes"]["bearerAuth"] == {"type": "http", "scheme": "bearer"}
    assert served["security"] == [{"bearerAuth": []}]
    described = operations(served)
    for path in ("/contacts", "/campaigns", "/lists", "/automations", "/forms", "/contact-fields"):
        names = {p["name"] for p in described[("get", path)].get("parameters", [])}
        assert "page" in names, path
    assert {"query", "email", "unsubscribed"} <= {
        p["name"] for p in described[("get", "/contacts")]["parameters"]
    }


def test_healthz_is_ok(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"] == "ok"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/nope"),
        ("POST", "/nope"),
        ("GET", "/contacts/1/nope"),
        ("GET", "/v2/contacts"),
        ("DELETE", "/unsubscribe/1"),
        ("GET", "/openapi.yml"),
        ("GET", "/%00"),
    ],
)
def test_unknown_routes_are_404_with_a_message(
    client: TestClient, api_user: ApiUser, method: str, path: str
) -> None:
    for headers in ({}, api_user.headers):
        response = client.request(method, path, headers=headers)
        assert response.status_code == 404, response.text
        assert response.headers["content-type"].startswith("application/json")
        body = response.json()
        assert set(body) == {"message"}, body
        assert isinstance(body["message"], str)
        assert body["message"]


def test_a_known_path_with_another_method_is_405_with_a_message(client: TestClient) -> None:
    response = client.put("/contacts", json={"email": "a@example.com"})
    assert response.status_code == 405
    assert set(response.json()) == {"message"}
