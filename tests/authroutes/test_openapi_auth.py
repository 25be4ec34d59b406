"""GET /api/auth/openapi.yaml: equal to the committed openapi/auth.yaml, a valid OpenAPI 3 document,
describing every /api/auth route the app serves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from openapi_spec_validator import validate

from app.authroutes import api_auth

COMMITTED = Path(__file__).resolve().parents[2] / "openapi" / "auth.yaml"
ROUTES = {
    ("post", "/api/auth/is-username-available"),
    ("post", "/api/auth/sign-up/email"),
    ("post", "/api/auth/sign-in/username"),
    ("post", "/api/auth/update-user"),
    ("get", "/api/auth/get-session"),
    ("post", "/api/auth/sign-out"),
}


def served(client: TestClient) -> dict[str, Any]:
    response = client.get("/api/auth/openapi.yaml")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/yaml")
    document: dict[str, Any] = yaml.safe_load(response.text)
    return document


def test_the_auth_description_equals_the_committed_file(client: TestClient) -> None:
    committed = yaml.safe_load(COMMITTED.read_text(encoding="utf-8"))
    assert served(client) == committed, "openapi/auth.yaml is stale: run `tidings openapi` and commit it"


def test_the_auth_description_is_valid_and_names_every_route(client: TestClient) -> None:
    document = served(client)
    validate(document)
    described = {(method, path) for path, item in document["paths"].items() for method in item}
    assert described == ROUTES
    for method, path in ROUTES:
        if method == "post" and path != "/api/auth/sign-out":
            assert "requestBody" in document["paths"][path][method], path
    declared = {
        (method.lower(), route.path)
        for route in api_auth.router.routes
        if isinstance(route, APIRoute)
        for method in route.methods
    }
    assert declared == ROUTES
    for method, path in ROUTES:
        assert client.request(method.upper(), path).status_code not in (404, 405), path
