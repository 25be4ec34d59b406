"""`tidings tokens list|revoke`, `lists create|list`, `forms list` and `oauth-clients list|delete` on the
test database (SQLite or PostgreSQL): tables of what exists, and exit status 1 with one clear line for
unknown users and ids."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from tests.cli_runner import Tidings, table, tidings_fixture  # noqa: F401

OWNER = "operator@example.com"


def owner(tidings: Tidings, email: str = OWNER) -> None:
    tidings.ok("users", "create", "--email", email, "--name", "Owner", "--no-password")


def me_status(tidings: Tidings, token: str) -> int:
    settings = Settings(
        database_url=tidings.database_url,
        var_dir=tidings.directory / "var",
        secret_key="k" * 40,
        redis_url="",
    )
    with TestClient(create_app(settings=settings), raise_server_exceptions=False) as client:
        return client.get("/me", headers={"Authorization": f"Bearer {token}"}).status_code


def test_tokens_list_shows_live_tokens_by_owner(tidings: Tidings) -> None:
    owner(tidings)
    owner(tidings, "other@example.com")
    first = tidings.ok("tokens", "create", "--email", OWNER, "--name", "zapier").strip()
    tidings.ok("tokens", "create", "--email", "other@example.com")
    rows = table(tidings.ok("tokens", "list"))
    mine = [row for row in rows if row["OWNER"] == OWNER]
    assert len(mine) == 1
    assert mine[0]["NAME"] == "zapier"
    assert mine[0]["TOKEN"] == first[:12] + "..."  # never the whole token
    assert mine[0]["LAST USED"] == "-"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", mine[0]["CREATED"])
    assert any(row["OWNER"] == "other@example.com" and row["NAME"] == "-" for row in rows)
    only = table(tidings.ok("tokens", "list", "--email", OWNER))
    assert [row["OWNER"] for row in only] == [OWNER]
    assert tidings.fails("tokens", "list", "--email", "nobody@example.com") == (
        "error: No user with the email nobody@example.com."
    )


def test_tokens_revoke_stops_the_token_and_is_refused_twice(tidings: Tidings) -> None:
    owner(tidings)
    token = tidings.ok("tokens", "create", "--email", OWNER, "--name", "leaked").strip()
    assert me_status(tidings, token) == 200
    token_id = table(tidings.ok("tokens", "list", "--email", OWNER))[0]["ID"]
    out = tidings.ok("tokens", "revoke", token_id)
    assert out == f"revoked token {token_id} (leaked, {token[:12]}...)\n"
    assert me_status(tidings, token) == 401
    assert tidings.ok("tokens", "list", "--email", OWNER) == "no tokens\n"
    assert tidings.fails("tokens", "revoke", token_id) == f"error: The token {token_id} was already revoked."
    assert tidings.fails("tokens", "revoke", "987654321") == "error: No token with the id 987654321."


def test_lists_create_and_list(tidings: Tidings) -> None:
    owner(tidings)
    assert tidings.ok("lists", "list", "--email", OWNER) == "no lists\n"
    first = int(tidings.ok("lists", "create", "--email", OWNER, "--name", "  Weekly news  "))
    second = int(tidings.ok("lists", "create", "--email", OWNER, "--name", "Launches"))
    rows = table(tidings.ok("lists", "list", "--email", OWNER))
    assert [(int(row["ID"]), row["NAME"], row["CONTACTS"]) for row in rows] == [
        (first, "Weekly news", "0"),
        (second, "Launches", "0"),
    ]
    assert tidings.scalar("SELECT account_id FROM contact_lists WHERE id = :i", i=first) == tidings.scalar(
        "SELECT account_id FROM users WHERE email_key = :e", e=OWNER
    )


def test_lists_refuse_an_empty_name_and_an_unknown_owner(tidings: Tidings) -> None:
    owner(tidings)
    assert "1 to 191 characters" in tidings.fails("lists", "create", "--email", OWNER, "--name", "  ")
    assert "1 to 191 characters" in tidings.fails("lists", "create", "--email", OWNER, "--name", "x" * 192)
    line = tidings.fails("lists", "create", "--email", "nobody@example.com", "--name", "N")
    assert line == "error: No user with the email nobody@example.com."
    assert tidings.fails("lists", "list", "--email", "nobody@example.com").endswith("nobody@example.com.")


def test_forms_list_shows_each_form_with_its_lists_and_url(tidings: Tidings) -> None:
    owner(tidings)
    assert tidings.ok("forms", "list", "--email", OWNER) == "no forms\n"
    news = tidings.ok("lists", "create", "--email", OWNER, "--name", "News").strip()
    offers = tidings.ok("lists", "create", "--email", OWNER, "--name", "Offers").strip()
    made = tidings.ok(
        "forms", "create", "--email", OWNER, "--title", "Join us", "--list", offers, "--list", news
    )
    form_id = made.split()[0]
    rows = table(tidings.ok("forms", "list", "--email", OWNER))
    assert len(rows) == 1
    assert rows[0]["ID"] == form_id
    assert rows[0]["TITLE"] == "Join us"
    assert rows[0]["LISTS"] == ",".join(sorted([news, offers], key=int))
    assert rows[0]["URL"] == f"https://mail.example.org/f/{form_id}"
    assert tidings.fails("forms", "list", "--email", "nobody@example.com").endswith("nobody@example.com.")


def test_forms_commands_say_which_server_address_they_assumed(tidings: Tidings) -> None:
    owner(tidings)
    list_id = tidings.ok("lists", "create", "--email", OWNER, "--name", "News").strip()
    made = tidings(
        "forms", "create", "--email", OWNER, "--title", "T", "--list", list_id, TIDINGS_BASE_URL=""
    )
    assert made.exit_code == 0, made.stderr
    form_id = made.stdout.split()[0]
    assert made.stdout == f"{form_id} http://127.0.0.1:8000/f/{form_id}\n"
    assert made.stderr == (
        "note: TIDINGS_BASE_URL is not set, so the URL assumes the server answers at "
        "http://127.0.0.1:8000; set TIDINGS_BASE_URL to the address people reach it at\n"
    )
    listed = tidings("forms", "list", "--email", OWNER, TIDINGS_BASE_URL="")
    assert "note: TIDINGS_BASE_URL is not set" in listed.stderr
    # Set, it is the URL, with nothing to note.
    assert tidings("forms", "list", "--email", OWNER).stderr == ""


def test_oauth_clients_list_and_delete(tidings: Tidings) -> None:
    owner(tidings)
    made = tidings.ok(
        "oauth-clients", "create", "--email", OWNER, "--name", "Zap",
        "--redirect-uri", "https://zap.example/cb", "--redirect-uri", "http://127.0.0.1:9999/cb",
    )  # fmt: skip
    client_id = made.split()[1]
    public = tidings.ok(
        "oauth-clients", "create", "--email", OWNER, "--name", "Desk app",
        "--redirect-uri", "http://localhost:8765/cb", "--public",
    ).split()[1]  # fmt: skip
    rows = {row["CLIENT ID"]: row for row in table(tidings.ok("oauth-clients", "list"))}
    assert rows[client_id]["NAME"] == "Zap"
    assert rows[client_id]["OWNER"] == OWNER
    assert rows[client_id]["TYPE"] == "confidential"
    assert rows[client_id]["REDIRECT URIS"] == "https://zap.example/cb http://127.0.0.1:9999/cb"
    assert rows[public]["TYPE"] == "public"
    out = tidings.ok("oauth-clients", "delete", client_id)
    assert out == f"deleted OAuth client {client_id} (Zap) and its tokens\n"
    assert tidings.scalar("SELECT count(*) FROM oauth_clients WHERE client_id = :c", c=client_id) == 0
    remaining = [row["CLIENT ID"] for row in table(tidings.ok("oauth-clients", "list"))]
    assert client_id not in remaining and public in remaining
    line = tidings.fails("oauth-clients", "delete", client_id)
    assert line == f"error: No OAuth client with the client_id {client_id}."


def test_each_group_lists_its_new_commands(tidings: Tidings) -> None:
    for group, commands in {
        "users": ["create", "list", "update", "set-password"],
        "tokens": ["create", "list", "revoke"],
        "lists": ["create", "list"],
        "forms": ["create", "list"],
        "oauth-clients": ["create", "list", "delete"],
        "contacts": ["import"],
    }.items():
        help_text = tidings.ok(group, "--help")
        for command in commands:
            assert re.search(rf"^\W*{command}\s", help_text, re.MULTILINE), (group, command, help_text)
