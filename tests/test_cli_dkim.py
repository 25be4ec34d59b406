"""`tidings dkim create|list|show|delete` on the test database (SQLite or PostgreSQL): the printed DNS
record verifies what the key signs, the private key is stored sealed, a second key of an algorithm
waits as a standby, and wrong input exits 1 with one clear line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import dkim
import pytest
from sqlalchemy import delete

from app.mail.sending.dkim import DkimSigner, KeyBox
from app.mail.sending.render import Recipient, compile_campaign, render
from app.mail.sending.tokens import MailTokens
from app.models import DkimKey
from tests.cli_runner import Tidings, table, tidings_fixture  # noqa: F401

DOMAINS = ("cli-dkim.example", "xn--cl-dkm-4vad.example")
SECRET = "cli-dkim-test-secret-key-long-enough-for-it"


@pytest.fixture
def dkim_cli(tidings: Tidings) -> Iterator[Any]:
    """`tidings dkim ...` with a fixed secret key; the keys it made (committed) go afterwards."""

    def run(*args: str, ok: bool = True) -> str:
        result = tidings("dkim", *args, TIDINGS_SECRET_KEY=SECRET)
        if ok:
            assert result.exit_code == 0, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}"
            return result.stdout
        assert result.exit_code == 1, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}"
        assert result.stdout == ""
        line = result.stderr.strip().splitlines()[-1]
        assert line.startswith("error: "), result.stderr
        return line

    yield run
    with tidings.engine.begin() as conn:
        conn.execute(delete(DkimKey).where(DkimKey.domain.in_(DOMAINS)))


def printed_record(stdout: str) -> tuple[str, str]:
    """(name, value) of the record `dkim create` printed."""
    fields = dict(re.findall(r"^(name|type|value|zone):\s+(.*)$", stdout, re.MULTILINE))
    assert fields["type"] == "TXT"
    return fields["name"], fields["value"]


def test_create_prints_the_record_that_verifies_its_signatures(dkim_cli: Any, tidings: Tidings) -> None:
    out = dkim_cli("create", "--domain", "CLI-DKIM.example", "--selector", "mail2026")
    assert out.startswith("rsa key mail2026 of cli-dkim.example: it signs from now on.\n")
    name, value = printed_record(out)
    assert name == "mail2026._domainkey.cli-dkim.example"
    assert re.fullmatch(r"v=DKIM1; k=rsa; p=MII[A-Za-z0-9+/]+=*", value)
    zone = re.search(r"^zone:\s+(.*)$", out, re.MULTILINE)
    assert zone is not None
    strings = re.findall(r'"([^"]*)"', zone.group(1))
    assert zone.group(1).startswith(f"{name}. IN TXT ( ")
    assert "".join(strings) == value and all(len(s) <= 255 for s in strings) and len(strings) == 2

    # Stored sealed: not a PEM in the table, and it opens only with the secret key.
    sealed = tidings.scalar("SELECT private_key FROM dkim_keys WHERE selector = 'mail2026'")
    assert "PRIVATE KEY" not in sealed
    assert KeyBox(SECRET).open(sealed).startswith(b"-----BEGIN PRIVATE KEY-----")

    signer = DkimSigner(SECRET)
    with tidings.engine.connect() as conn:
        from sqlalchemy.orm import Session

        with Session(conn) as session:
            signer.refresh(session)
    compiled = compile_campaign(1, "Bonjour ✓", "<p>x</p>", "Zoë", "news@cli-dkim.example")
    message = render(
        compiled, Recipient(1, "a@example.org", None, None, {}), MailTokens(SECRET), "https://x.example"
    )
    signed = signer.sign(message.message, compiled.from_email)
    published = {f"{name}.".encode(): value.encode()}
    assert dkim.verify(signed, dnsfunc=lambda n, timeout=5: published.get(n))


def test_default_selectors_ed25519_list_show_and_delete(dkim_cli: Any) -> None:
    first = dkim_cli("create", "--domain", "cli-dkim.example")
    selector = re.match(r"rsa key (tidings\d{6}) of", first)
    assert selector is not None
    ed = dkim_cli("create", "--domain", "cli-dkim.example", "--algorithm", "ed25519")
    assert ed.startswith(f"ed25519 key {selector.group(1)}ed of cli-dkim.example: it signs from now on.")
    assert re.fullmatch(r"v=DKIM1; k=ed25519; p=[A-Za-z0-9+/]{43}=", printed_record(ed)[1])
    standby = dkim_cli("create", "--domain", "cli-dkim.example", "--selector", "next")
    assert standby.startswith(
        "rsa key next of cli-dkim.example: standby, it signs once the older rsa key of cli-dkim.example "
        "is deleted (`tidings dkim delete`)."
    )

    rows = table(dkim_cli("list", "--domain", "cli-dkim.example"))
    assert [(r["SELECTOR"], r["ALGORITHM"], r["STATE"]) for r in rows] == [
        (selector.group(1), "rsa", "signing"),
        (f"{selector.group(1)}ed", "ed25519", "signing"),
        ("next", "rsa", "standby"),
    ]
    assert rows[2]["DNS NAME"] == "next._domainkey.cli-dkim.example"
    shown = dkim_cli("show", "--domain", "cli-dkim.example")
    assert shown.count("type:   TXT") == 3
    assert printed_record(standby)[1] in shown

    out = dkim_cli("delete", "--domain", "cli-dkim.example", "--selector", selector.group(1))
    assert out.startswith(f"deleted the rsa key {selector.group(1)} of cli-dkim.example; keep its DNS record")
    rows = table(dkim_cli("list", "--domain", "cli-dkim.example"))
    assert [(r["SELECTOR"], r["STATE"]) for r in rows] == [
        (f"{selector.group(1)}ed", "signing"),
        ("next", "signing"),
    ]
    assert dkim_cli("list", "--domain", "nothing-here.example") == "no keys\n"


def test_a_key_sealed_with_the_generated_secret_says_where_that_secret_is(tidings: Tidings) -> None:
    try:
        result = tidings("dkim", "create", "--domain", "cli-dkim.example")
        assert result.exit_code == 0, result.stderr
        assert printed_record(result.stdout)[0].endswith("._domainkey.cli-dkim.example")
        secret = tidings.directory / "var" / "secret_key"
        assert result.stderr.replace("\n", " ") == (
            f"note: the private key is sealed with the secret key in {secret}: run `tidings serve` and "
            "`tidings worker` with the same TIDINGS_VAR_DIR, or set TIDINGS_SECRET_KEY for all of them "
        )
        sealed = tidings.scalar("SELECT private_key FROM dkim_keys WHERE domain = 'cli-dkim.example'")
        assert KeyBox(secret.read_text().strip()).open(sealed).startswith(b"-----BEGIN PRIVATE KEY")
    finally:
        with tidings.engine.begin() as conn:
            conn.execute(delete(DkimKey).where(DkimKey.domain.in_(DOMAINS)))


def test_an_international_domain_is_kept_in_its_ascii_form(dkim_cli: Any) -> None:
    out = dkim_cli("create", "--domain", "clí-dkím.example", "--selector", "s1")
    assert printed_record(out)[0] == "s1._domainkey.xn--cl-dkm-4vad.example"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ("create", "--domain", "localhost"),
            "error: 'localhost' is not a domain name (such as example.com).",
        ),
        (
            ("create", "--domain", "bad_domain.example"),
            "error: 'bad_domain.example' is not a domain name (such as example.com).",
        ),
        (
            ("create", "--domain", "x" * 64 + ".example"),
            f"error: '{'x' * 64}.example' is not a domain name (such as example.com).",
        ),
        (
            ("create", "--domain", "cli-dkim.example", "--selector", "-bad"),
            "error: '-bad' is not a selector: letters, digits and inner hyphens, at most 63 characters.",
        ),
        (
            ("create", "--domain", "cli-dkim.example", "--algorithm", "dsa"),
            "error: The algorithm must be one of rsa, ed25519.",
        ),
        (
            ("delete", "--domain", "cli-dkim.example", "--selector", "nope"),
            "error: cli-dkim.example has no key with the selector nope.",
        ),
        (
            ("show", "--domain", "cli-dkim.example"),
            "error: cli-dkim.example has no DKIM key (`tidings dkim create --domain cli-dkim.example`)",
        ),
    ],
)
def test_wrong_input_exits_1_with_one_line(dkim_cli: Any, args: tuple[str, ...], error: str) -> None:
    assert dkim_cli(*args, ok=False) == error


def test_a_taken_selector_is_refused(dkim_cli: Any) -> None:
    dkim_cli("create", "--domain", "cli-dkim.example", "--selector", "s1")
    assert dkim_cli("create", "--domain", "cli-dkim.example", "--selector", "S1", ok=False) == (
        "error: cli-dkim.example already has a key with the selector s1: choose another with --selector."
    )
