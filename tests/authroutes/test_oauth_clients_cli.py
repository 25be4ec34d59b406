"""`tidings oauth-clients create`, run for real: prints client_id and client_secret (the secret works
at the token endpoint and is stored only hashed); bad input exits 1 with one line."""

from __future__ import annotations

import re

import pytest

from tests.test_cli import Place, finish, ok, user_error

OWNER = "integrator@example.com"


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Place:
    made = Place(tmp_path_factory.mktemp("oauth-cli"))
    ok(made.run("users", "create", "--email", OWNER, "--name", "Integrator", "--username", "integrator"))
    return made


def test_create_prints_the_id_and_a_secret_stored_hashed(place: Place) -> None:
    out = ok(
        place.run(
            "oauth-clients",
            "create",
            "--email",
            OWNER,
            "--name",
            "Zap",
            "--redirect-uri",
            "https://zap.example/cb",
            "--redirect-uri",
            "http://127.0.0.1:9999/cb",
        )
    )
    found = re.fullmatch(r"client_id: (\S+)\nclient_secret: (\S+)\n", out)
    assert found, out
    client_id, secret = found.groups()
    assert place.scalar("SELECT name FROM oauth_clients WHERE client_id = :c", c=client_id) == "Zap"
    stored = place.scalar("SELECT client_secret_hash FROM oauth_clients WHERE client_id = :c", c=client_id)
    assert stored and stored != secret
    uris = place.scalar("SELECT redirect_uris FROM oauth_clients WHERE client_id = :c", c=client_id)
    assert uris == "https://zap.example/cb\nhttp://127.0.0.1:9999/cb"
    with place.client() as client:
        # The secret authenticates the client: the refusal is about the code, not the client.
        response = client.post(
            "/oauth/token", data={"grant_type": "authorization_code", "code": "x"}, auth=(client_id, secret)
        )
        assert response.json()["error"] == "invalid_grant"
        response = client.post(
            "/oauth/token", data={"grant_type": "authorization_code", "code": "x"}, auth=(client_id, "wrong")
        )
        assert response.json()["error"] == "invalid_client"


def test_a_public_client_gets_no_secret(place: Place) -> None:
    out = ok(
        place.run(
            "oauth-clients",
            "create",
            "--email",
            OWNER,
            "--name",
            "CLI app",
            "--redirect-uri",
            "http://localhost:8765/cb",
            "--public",
        )
    )
    assert re.fullmatch(r"client_id: \S+\n", out), out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("--email", "nobody@example.com", "--name", "Z", "--redirect-uri", "https://z.example/cb"),
            "nobody",
        ),
        (("--email", OWNER, "--name", "Z", "--redirect-uri", "http://z.example/cb"), "loopback"),
        (("--email", OWNER, "--name", "Z", "--redirect-uri", "https://z.example/cb#frag"), "fragment"),
        (("--email", OWNER, "--name", "Z", "--redirect-uri", "zap:/cb"), "absolute"),
        (("--email", OWNER, "--name", " ", "--redirect-uri", "https://z.example/cb"), "name"),
    ],
)
def test_bad_input_exits_1_with_one_line(place: Place, args: tuple[str, ...], says: str) -> None:
    before = place.scalar("SELECT count(*) FROM oauth_clients")
    line = user_error(finish(place.start("oauth-clients", "create", *args)))
    assert says in line
    assert place.scalar("SELECT count(*) FROM oauth_clients") == before
