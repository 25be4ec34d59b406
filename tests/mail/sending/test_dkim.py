"""DKIM signatures on what the real render path makes, checked by dkimpy against the DNS record the key's
owner is told to publish: RSA and Ed25519, non-ASCII headers, a long html body, the headers the bulk
senders' rules look at (List-Unsubscribe and List-Unsubscribe-Post), rotation, an unreadable key, no key;
and a send worker's emails on the loopback SMTP server."""

from __future__ import annotations

import base64
import logging
import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import dkim
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.config import Settings
from app.kit.time import utcnow
from app.mail.dkim_service import KeyRecord, create_key, delete_key
from app.mail.sending.dkim import (
    SIGNATURE_NAME,
    DkimSigner,
    Insertions,
    SigningKey,
    _clean_signed_headers,
    _signature_header_by_parsing,
    header_hash_input,
    parse_header_block,
    relaxed_body,
    signature_header,
)
from app.mail.sending.render import Recipient, RenderedMessage, compile_campaign, render
from app.mail.sending.smtp import WireMessage
from app.mail.sending.tokens import MailTokens
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list

SECRET = "dkim-test-secret-key-long-enough-to-seal-keys"
TOKENS = MailTokens(SECRET)
BASE = "https://mail.example.com"
LONG_HTML = (
    "<html><body>"
    + "".join(
        f"<p>Paragraphe {n}: déjà vu, 日本語, "
        f'<a href="https://example.com/{n}?q={{{{ first_name }}}}">lien</a></p>'
        for n in range(2000)
    )
    + "</body></html>"
)


def dns_of(*records: KeyRecord) -> Any:
    """A `dnsfunc` for dkimpy: the TXT value published at each record's name, nothing elsewhere."""
    published = {f"{record.dns_name}.": record.txt_value.encode("ascii") for record in records}

    def lookup(name: bytes | str, timeout: int = 5) -> bytes | None:
        key = name.decode("ascii") if isinstance(name, bytes) else name
        return published.get(key)

    return lookup


def rendered(
    html: str = "<p>Hi {{ first_name }}</p>",
    subject: str = "Héllo {{ first_name }} ✓",
    from_name: str = "Zoë Müller",
    from_email: str = "news@example.com",
) -> bytes:
    compiled = compile_campaign(7, subject, html, from_name, from_email)
    recipient = Recipient(42, "anaïs@example.org", "Anaïs", "Ødegård", {})
    return render(compiled, recipient, TOKENS, BASE, to_sign=True).message


def signed_tags(message: bytes, index: int = 0) -> dict[bytes, bytes]:
    signer = dkim.DKIM(message)
    signatures = [value for name, value in signer.headers if name.lower() == b"dkim-signature"]
    tags = dkim.util.parse_tag_value(signatures[index])
    return {name: b"".join(value.split()) for name, value in tags.items()}


def verifies(message: bytes, dnsfunc: Any, index: int = 0) -> bool:
    return bool(dkim.DKIM(message).verify(idx=index, dnsfunc=dnsfunc))


def key(db: Session, domain: str, **options: Any) -> KeyRecord:
    options.setdefault("selector", None)
    options.setdefault("algorithm", "rsa")
    return create_key(db, SECRET, domain, now=options.pop("now", utcnow()), **options)


def test_an_rsa_signature_on_a_rendered_email_with_non_ascii_headers_and_a_long_body(db: Session) -> None:
    record = key(db, "example.com", selector="s1")
    assert record.dns_name == "s1._domainkey.example.com"
    assert record.txt_value.startswith("v=DKIM1; k=rsa; p=MII")
    signer = DkimSigner(SECRET)
    signer.refresh(db)
    message = rendered(html=LONG_HTML)
    assert len(message) > 300_000
    signed = signer.sign(message, "news@example.com")

    assert signed.endswith(message) and signed.startswith(b"DKIM-Signature: ")
    assert isinstance(signed, WireMessage)  # still ready for SMTP's DATA as it is
    assert dkim.verify(signed, dnsfunc=dns_of(record))
    tags = signed_tags(signed)
    assert tags[b"a"] == b"rsa-sha256" and tags[b"c"] == b"relaxed/relaxed"
    assert (tags[b"d"], tags[b"s"]) == (b"example.com", b"s1")
    signed_names = tags[b"h"].split(b":")
    for name in (b"from", b"to", b"subject", b"date", b"message-id", b"mime-version", b"content-type"):
        assert name in signed_names
    # RFC 8058: the one-click unsubscribe headers must be covered, and none may be added later.
    assert signed_names.count(b"list-unsubscribe") == 2
    assert signed_names.count(b"list-unsubscribe-post") == 2
    assert signed_names.count(b"from") == 2


def test_the_signature_breaks_when_a_signed_header_or_the_body_changes(db: Session) -> None:
    record = key(db, "example.com", selector="s1")
    signer = DkimSigner(SECRET)
    signer.refresh(db)
    signed = signer.sign(rendered(), "news@example.com")
    dns = dns_of(record)
    assert dkim.verify(signed, dnsfunc=dns)
    # Relaxed canonicalisation: refolding and spacing do not matter...
    assert dkim.verify(signed.replace(b"\r\nTo: ", b"\r\nTo:    "), dnsfunc=dns)
    # ...but another subject, an added List-Unsubscribe or another body do.
    subject_line = next(line for line in signed.split(b"\r\n") if line.startswith(b"Subject: "))
    assert not dkim.verify(signed.replace(subject_line, b"Subject: Win a prize"), dnsfunc=dns)
    added = signed.replace(
        b"\r\nMIME-Version:", b"\r\nList-Unsubscribe: <https://evil.example/>\r\nMIME-Version:"
    )
    assert not dkim.verify(added, dnsfunc=dns)
    changed = b"B" if signed[-40:-39] == b"A" else b"A"  # another character, whatever the body ends with
    assert not dkim.verify(signed[:-40] + changed + signed[-39:], dnsfunc=dns)
    # A record that holds another key does not verify it.
    other = key(db, "example.com", selector="s2")
    impostor = KeyRecord(
        record.domain, record.selector, "rsa", record.created_at, other.txt_value, signing=True
    )
    assert not dkim.verify(signed, dnsfunc=dns_of(impostor))


def test_an_ed25519_signature_beside_the_rsa_one(db: Session) -> None:
    rsa_record = key(db, "example.com", selector="r1")
    ed_record = key(db, "example.com", selector="e1", algorithm="ed25519")
    assert ed_record.txt_value.startswith("v=DKIM1; k=ed25519; p=")
    assert ed_record.signing and rsa_record.signing  # one key of each algorithm signs
    signer = DkimSigner(SECRET)
    signer.refresh(db)
    signed = signer.sign(rendered(html=LONG_HTML), "news@example.com")

    dns = dns_of(rsa_record, ed_record)
    algorithms = {signed_tags(signed, n)[b"a"]: n for n in (0, 1)}
    assert set(algorithms) == {b"rsa-sha256", b"ed25519-sha256"}
    assert verifies(signed, dns, algorithms[b"rsa-sha256"])
    assert verifies(signed, dns, algorithms[b"ed25519-sha256"])
    # Only the Ed25519 record published: its signature alone verifies.
    assert verifies(signed, dns_of(ed_record), algorithms[b"ed25519-sha256"])
    assert not verifies(signed, dns_of(ed_record), algorithms[b"rsa-sha256"])


def test_an_email_whose_from_domain_has_no_key_goes_unsigned(db: Session) -> None:
    signer = DkimSigner(SECRET)
    signer.refresh(db)
    message = rendered()
    assert signer.sign(message, "news@example.com") is message  # no key at all
    key(db, "example.com", selector="s1")
    signer.refresh(db)
    other = rendered(from_email="news@other.example")
    assert signer.sign(other, "news@other.example") is other
    assert signer.sign(rendered(from_email="news@sub.example.com"), "news@sub.example.com").startswith(
        b"From: "
    )  # a subdomain needs its own key
    assert signer.sign(message, "NEWS@EXAMPLE.COM").startswith(b"DKIM-Signature: ")


def test_an_international_from_domain_is_signed_in_its_ascii_form(db: Session) -> None:
    record = key(db, "Exämple.COM.", selector="s1")
    assert record.domain == "xn--exmple-cua.com"
    signer = DkimSigner(SECRET)
    signer.refresh(db)
    compiled = compile_campaign(7, "Hi", "<p>x</p>", "Zoë", "news@exämple.com")
    message = render(
        compiled, Recipient(1, "a@example.org", None, None, {}), TOKENS, BASE, to_sign=True
    ).message
    signed = signer.sign(message, compiled.from_email)
    assert signed_tags(signed)[b"d"] == b"xn--exmple-cua.com"
    assert dkim.verify(signed, dnsfunc=dns_of(record))


def test_unsigned_headers_are_left_out_and_may_then_change(db: Session) -> None:
    """Amazon SES rewrites Date and Message-ID: TIDINGS_DKIM_UNSIGNED_HEADERS leaves them out."""
    record = key(db, "example.com", selector="s1")
    signer = DkimSigner(
        SECRET, Settings(dkim_unsigned_headers="Date, message-id").dkim_unsigned_headers.split(",")
    )
    signer.refresh(db)
    signed = signer.sign(rendered(), "news@example.com")
    names = signed_tags(signed)[b"h"].split(b":")
    assert b"date" not in names and b"message-id" not in names and b"from" in names
    rewritten = b"\r\n".join(
        b"Message-ID: <0100018c@email.amazonses.com>" if line.startswith(b"Message-ID: ") else line
        for line in signed.split(b"\r\n")
    )
    assert rewritten != signed
    assert dkim.verify(rewritten, dnsfunc=dns_of(record))


def test_rotation_the_oldest_key_signs_until_it_is_deleted(db: Session) -> None:
    now = utcnow()
    old = key(db, "example.com", selector="old", now=now - timedelta(days=30))
    new = key(db, "example.com", selector="new", now=now)
    assert old.signing and not new.signing
    signer = DkimSigner(SECRET)
    signer.refresh(db)
    assert signed_tags(signer.sign(rendered(), "news@example.com"))[b"s"] == b"old"
    delete_key(db, "example.com", "old")
    signer.refresh(db)
    signed = signer.sign(rendered(), "news@example.com")
    assert signed_tags(signed)[b"s"] == b"new"
    assert dkim.verify(signed, dnsfunc=dns_of(new))


def test_a_key_sealed_under_another_secret_is_skipped_with_an_error(
    db: Session, caplog: pytest.LogCaptureFixture
) -> None:
    key(db, "example.com", selector="s1")
    signer = DkimSigner("another-secret-key-than-the-one-that-sealed-it")
    with caplog.at_level(logging.ERROR, logger="tidings.sending"):
        signer.refresh(db)
        signer.refresh(db)  # said once, not once a batch
    assert [r.getMessage() for r in caplog.records].count(
        "the DKIM key s1 of example.com cannot be read (was TIDINGS_SECRET_KEY changed since "
        "`tidings dkim create`?): its email goes out without that signature"
    ) == 1
    message = rendered()
    assert signer.sign(message, "news@example.com") is message


def test_a_send_worker_signs_what_reaches_the_smtp_server(
    client: Any, api_user: Any, sender: Sender, smtp_sink: SmtpSink, db: Session, settings: Settings
) -> None:
    record = create_key(
        db, settings.resolved_secret_key, "example.com", selector="s1", algorithm="rsa", now=utcnow()
    )
    db.commit()
    signer = sender.worker.dkim = DkimSigner(settings.resolved_secret_key)
    with_facts: list[bool] = []
    sign = signer.sign

    def sign_noting_the_facts(message: bytes, from_address: str) -> bytes:
        with_facts.append(getattr(message, "facts", None) is not None)
        return sign(message, from_address)

    signer.sign = sign_noting_the_facts  # type: ignore[method-assign]
    emails = ["ann@example.com", "bob@example.com"]
    campaign_id = campaign_with_list(
        client, api_user.headers, emails, subject="Ça va, {{ first_name | 'ami' }} ?", from_name="Zoë"
    )
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    assert sender.drain() == 2
    assert len(smtp_sink.received) == 2
    for received in smtp_sink.received:
        assert received.data.startswith(b"DKIM-Signature: ")
        assert dkim.verify(received.data, dnsfunc=dns_of(record))
        assert received.message["Subject"] == "Ça va, ami ?"
    assert with_facts == [True, True]  # rendered to be signed: what render knows goes with it


@pytest.mark.parametrize(
    ("value", "error"),
    [("from", "From is always signed"), ("date, bad name", "'bad name' is not a header name")],
)
def test_unsigned_headers_refuse_from_and_what_is_not_a_header_name(value: str, error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        Settings(dkim_unsigned_headers=value)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\r\n",
        b"\r\n\r\n",
        b"abc",
        b"abc\r\n\r\n\r\n",
        b"a b\r\nc d\r\n",
        b"a  b\r\n",
        b"a\tb\r\n",
        b"a \r\n\r\n",
        b"trailing space ",
        b" leading\r\n \r\n",
        b'--=_x\r\nContent-Type: text/plain; charset="utf-8"\r\n\r\nSGVsbG8=\r\n--=_x--\r\n',
    ],
)
def test_the_relaxed_body_is_dkimpys(body: bytes) -> None:
    assert relaxed_body(body) == dkim.CanonicalizationPolicy.from_c_value(
        b"relaxed/relaxed"
    ).canonicalize_body(body)


class Recorded:
    """A hasher that keeps what it is fed."""

    def __init__(self) -> None:
        self.data = b""

    def update(self, data: bytes) -> None:
        self.data += data


def test_the_header_hash_input_is_dkimpys() -> None:
    """Repeated, folded, tabbed, oddly spaced and unsigned headers: the bytes hashed are those dkimpy's
    hash_headers hashes over its own relaxed headers."""
    headers = [
        (b"From", b" First <a@example.com>\r\n"),
        (b"X-Other", b" not signed\r\n"),
        (b"Subject", b" a  folded\r\n\tsubject \r\n"),
        (b"from", b" Second <b@example.com>\r\n"),
        (b"TO ", b"\tr@example.com\r\n"),
        (b"Date", b" Thu, 26 Nov 2026 10:00:00 +0000\r\n"),
        (b"List-Unsubscribe", b" <https://example.com/u>\r\n"),
    ]
    include = [b"from", b"to", b"subject", b"date", b"list-unsubscribe", b"from", b"from", b"cc"]
    signature = (b"DKIM-Signature", b" v=1; a=rsa-sha256; d=example.com;\r\n s=s1; b=")
    relaxed = dkim.CanonicalizationPolicy.from_c_value(b"relaxed/relaxed")
    theirs = Recorded()
    dkim.hash_headers(theirs, relaxed, relaxed.canonicalize_headers(headers), include, signature, None)
    assert header_hash_input(headers, include, signature) == theirs.data


def test_a_test_send_is_signed_exactly_like_the_campaign(
    client: Any, api_user: Any, sender: Sender, smtp_sink: SmtpSink, db: Session, settings: Settings
) -> None:
    """The app's test send (POST /campaigns/{id}/test) and the worker's real send carry the same kind of
    signature: the same key, the same headers signed (h=), both verifying."""
    settings.smtp_url = smtp_sink.url
    record = create_key(
        db, settings.resolved_secret_key, "example.com", selector="s1", algorithm="rsa", now=utcnow()
    )
    db.commit()
    sender.worker.dkim = DkimSigner(settings.resolved_secret_key)
    campaign_id = campaign_with_list(
        client, api_user.headers, ["ann@example.com"], reply_to="desk@example.com"
    )
    answer = client.post(
        f"/campaigns/{campaign_id}/test", json={"emails": ["me@example.com"]}, headers=api_user.headers
    )
    assert answer.status_code == 200, answer.text
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    assert sender.drain() == 1
    test_email, real_email = smtp_sink.received
    assert test_email.data.startswith(b"DKIM-Signature: ")
    assert dkim.verify(test_email.data, dnsfunc=dns_of(record))
    assert dkim.verify(real_email.data, dnsfunc=dns_of(record))
    test_tags, real_tags = signed_tags(test_email.data), signed_tags(real_email.data)
    for tag in (b"d", b"s", b"a", b"c", b"h"):
        assert test_tags[tag] == real_tags[tag], tag
    # A From domain without a key: the test email goes unsigned, as the campaign would.
    other = campaign_with_list(client, api_user.headers, [], from_email="news@elsewhere.example")
    client.post(f"/campaigns/{other}/test", json={"emails": ["me@example.com"]}, headers=api_user.headers)
    assert not smtp_sink.received[-1].data.startswith(b"DKIM-Signature: ")


def random_header_block(rng: random.Random) -> bytes:
    """A message's header lines through the empty line, mostly well formed, now and then not: folded and
    tabbed values, non-ASCII bytes, a lone CR or LF, an mbox "From " line, a name with a space or a
    control byte, a line without a colon, a first line that continues nothing."""
    names = [b"From", b"To", b"Subject", b"List-Unsubscribe", b"X-Odd_Name!", b"from", b"A", b"Content-Type"]
    pieces = [
        b"value",
        b" ",
        b"  ",
        b"\t",
        b"d\xc3\xa9j\xc3\xa0",
        b"a:b",
        b"<u@example.com>",
        b";",
        b"=?utf-8?q?x?=",
    ]
    lines = []
    for _ in range(rng.randint(0, 12)):
        value = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        lines.append(rng.choice(names) + b":" + value)
        for _ in range(rng.choice([0, 0, 0, 1, 2])):
            lines.append(rng.choice([b" ", b"\t", b"  "]) + b"".join(rng.choice(pieces) for _ in range(3)))
    oddities = [
        lambda: lines.insert(0, b"From sender@example.com Thu Nov 26 10:00:00 2026"),
        lambda: lines.insert(0, b" continues nothing"),
        lambda: lines.append(b"no colon here"),
        lambda: lines.append(b"Bad Name: x"),
        lambda: lines.append(b"Bad\x01Name: x"),
        lambda: lines.append(b": empty name"),
        lambda: lines.append(b"Lone: a\rb"),
    ]
    if lines and rng.random() < 0.3:
        rng.choice(oddities)()
    block = b"\r\n".join(lines) + b"\r\n\r\n"
    if rng.random() < 0.1:
        block = block.replace(b"\r\n", b"\n", 1)  # a bare LF, which dkimpy also takes as a line end
    return block


def parsed_or_error(parse: Callable[[bytes], Any], block: bytes) -> Any:
    try:
        return [list(header) for header in parse(block)]
    except Exception as exc:  # the same error as dkimpy's, for a block neither can read
        return type(exc)


def test_the_header_block_is_parsed_as_dkimpy_parses_it() -> None:
    rng = random.Random(27)
    blocks = [random_header_block(rng) for _ in range(3000)]
    blocks += [b"\r\n\r\n", b"A: b\r\n\r\n", rendered(), rendered()[: rendered().find(b"\r\n\r\n") + 4]]
    for block in blocks:
        theirs = parsed_or_error(lambda b: dkim.rfc822_parse(b)[0], block)
        assert parsed_or_error(parse_header_block, block) == theirs, block


def test_rendered_emails_signed_here_verify_with_dkimpy(db: Session) -> None:
    """Many recipients and subjects through the real render path, each signature checked by dkimpy."""
    record = key(db, "example.com")
    signer = DkimSigner(SECRET)
    signer.refresh(db)
    dnsfunc = dns_of(record)
    rng = random.Random(45)
    for n in range(40):
        words = ["Héllo", "{{ first_name }}", "a  b", "\t", "✓", "déjà", "x" * rng.randint(1, 90)]
        subject = " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
        html = "<p>" + "  ".join(rng.choice(words) for _ in range(rng.randint(1, 60))) + f" {n}</p>"
        message = signer.sign(rendered(html=html, subject=subject), "news@example.com")
        assert verifies(message, dnsfunc), message


def test_random_bodies_are_made_relaxed_as_dkimpy_makes_them() -> None:
    rng = random.Random(94)
    pieces = [
        b"a",
        b"word",
        b" ",
        b"  ",
        b"\t",
        b"\r\n",
        b" \r\n",
        b"\r\n\r\n",
        b"=20",
        b"SGVsbG8=",
        b"\r",
        b"\n",
    ]
    relaxed = dkim.CanonicalizationPolicy.from_c_value(b"relaxed/relaxed")
    bodies = [b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 40))) for _ in range(5000)]
    bodies += [rendered(), rendered(html=LONG_HTML)]
    for body in bodies:
        assert relaxed_body(body) == relaxed.canonicalize_body(body), body


RELAXED = dkim.CanonicalizationPolicy.from_c_value(b"relaxed/relaxed")
RSA_KEY = SigningKey(
    b"example.com", b"s1", "rsa", rsa.generate_private_key(public_exponent=65537, key_size=2048)
)
ED25519_KEY = SigningKey(b"example.com", b"e1", "ed25519", ed25519.Ed25519PrivateKey.generate())
RSA_1024_PRIVATE = rsa.generate_private_key(public_exponent=65537, key_size=1024)
NOW = 1_795_000_000


def signed_or_error(message: bytes, key: SigningKey, sign: Callable[..., bytes], **options: Any) -> Any:
    try:
        return sign(message, key, now=NOW, **options)
    except Exception as exc:  # the same error both ways, for a message neither can sign
        return type(exc)


def fast_path_taken(message: bytes, unsigned: tuple[bytes, ...] = ()) -> bool:
    end = message.find(b"\r\n\r\n")
    return end >= 0 and _clean_signed_headers(message[: end + 2], unsigned) is not None


def test_rendered_emails_take_the_fast_path_and_sign_as_the_parsing_path_does() -> None:
    """Both key kinds, with and without headers left unsigned, a Reply-To and folded non-ASCII headers:
    the same header, byte for byte, as the path that parses every header."""
    rng = random.Random(48)
    for n in range(30):
        words = ["Héllo", "{{ first_name }}", "a  b", "✓", "déjà", "x" * rng.randint(1, 90)]
        subject = " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
        html = "<p>" + "  ".join(rng.choice(words) for _ in range(rng.randint(1, 60))) + f" {n}</p>"
        message = rendered(html=html, subject=subject, from_name=rng.choice(["Zoë Müller", "News", ""]))
        assert fast_path_taken(message), message
        for key in (RSA_KEY, ED25519_KEY):
            for unsigned in ((), (b"date", b"message-id")):
                ours = signature_header(message, key, now=NOW, unsigned=unsigned)
                assert ours == _signature_header_by_parsing(message, key, now=NOW, unsigned=unsigned)
    signed = signature_header(message, RSA_KEY, now=NOW) + message
    assert dkim.DKIM(signed).verify(dnsfunc=dns_of(record_of(RSA_KEY)))


def record_of(key: SigningKey) -> KeyRecord:
    """The DNS record of an RSA key made in the test, not stored."""
    assert isinstance(key.private, rsa.RSAPrivateKey)
    public = key.private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    txt = f"v=DKIM1; k=rsa; p={base64.b64encode(public).decode('ascii')}"
    return KeyRecord(key.domain.decode(), key.selector.decode(), "rsa", utcnow(), txt, signing=True)


@pytest.mark.parametrize(
    "message",
    [
        b"From: a@example.com\nTo: b@example.com\r\n\r\nbody\r\n",  # a bare LF
        b"From: a@example.com\r\nSubject: a\r\n\tfolded with a tab\r\n\r\nbody\r\n",
        b"From: a@example.com\r\nSubject: a  run of spaces\r\n\r\nbody\r\n",
        b"From: a@example.com\r\nSubject: a space before the line end \r\n\r\nbody\r\n",
        b"From: a@example.com\r\nSubject: a fold after a space \r\n continued\r\n\r\nbody\r\n",
        b"From: a@example.com\r\nSubject:\ta tab\r\n\r\nbody\r\n",
        b"From: a@example.com\r\nSubject: a form feed\x0c\r\n\r\nbody\r\n",
        b"From: a@example.com\r\nSubject: a lone\rCR\r\n\r\nbody\r\n",
        b"From: a@example.com\r\nTO : a name with a space\r\n\r\nbody\r\n",
        b"From sender@example.com Thu Nov 26 10:00:00 2026\r\nFrom: a@example.com\r\n\r\nbody\r\n",
        b"From: a@example.com\r\nno colon\r\n\r\nbody\r\n",
        b"From: a@example.com\r\nnocolon\r\n\r\nbody\r\n",
        b" continues nothing\r\nFrom: a@example.com\r\n\r\nbody\r\n",
        b"From: a@example.com\r\nTo: b@example.com\r\n",  # no empty line, no body
        b"From: a@example.com\n\nan LF message, not rendered by us\n",
        b"\r\n\r\nno headers\r\n",
    ],
)
def test_unusual_messages_go_the_parsing_path(message: bytes) -> None:
    assert not fast_path_taken(message)
    for key in (RSA_KEY, ED25519_KEY):
        ours = signed_or_error(message, key, signature_header)
        assert ours == signed_or_error(message, key, _signature_header_by_parsing)


@pytest.mark.parametrize(
    "message",
    [
        b"From: a@example.com\r\nFrom: b@example.com\r\nTo: c@example.com\r\nfrom: d@example.com\r\n"
        b"\r\nbody\r\n",  # a header named twice (and a third time in lowercase)
        b"FROM:a@example.com\r\nSubject:\r\nList-Unsubscribe:\r\n <https://example.com/u>,\r\n"
        b" <mailto:u@example.com>\r\n\r\n",  # no space after the colon, an empty value, folds, no body
        b"From: a@example.com\r\n\r\n",  # no body at all
        b"X-Only: nothing signed but From's oversigning\r\n\r\nbody",
    ],
)
def test_clean_but_unusual_headers_take_the_fast_path_and_sign_as_the_parsing_path_does(
    message: bytes,
) -> None:
    assert fast_path_taken(message)
    for key in (RSA_KEY, ED25519_KEY):
        assert signature_header(message, key, now=NOW) == _signature_header_by_parsing(message, key, now=NOW)


def clean_header_block(rng: random.Random) -> bytes:
    """Header lines as render.py writes them (single spaces, CRLF folds before a space), names repeated
    in any case, values empty or not, now and then a colon without a space after it."""
    names = [b"From", b"To", b"Subject", b"List-Unsubscribe", b"from", b"TO", b"X-Other", b"Content-Type"]
    words = [b"value", b"d\xc3\xa9j\xc3\xa0", b"a:b", b"<u@example.com>", b";", b"=?utf-8?q?x?=", b","]
    lines = []
    for _ in range(rng.randint(1, 12)):
        value = b" ".join(rng.choice(words) for _ in range(rng.randint(0, 5)))
        folds = b"".join(b"\r\n " + rng.choice(words) for _ in range(rng.choice([0, 0, 1, 2])))
        line = rng.choice(names) + (b":" if not value or rng.random() < 0.1 else b": ") + value + folds
        lines.append(line)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def test_random_messages_sign_the_same_either_way() -> None:
    """Random header blocks (well formed or not) over random bodies: the same header or the same error."""
    rng = random.Random(4848)
    pieces = [b"a", b" ", b"  ", b"\t", b"\r\n", b" \r\n", b"\r\n\r\n", b"SGVsbG8=", b"\n"]
    fast = 0
    for _ in range(1500):
        body = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 20)))
        block = random_header_block(rng) if rng.random() < 0.5 else clean_header_block(rng)
        message = block + body
        fast += fast_path_taken(message)
        for key in (RSA_KEY, ED25519_KEY) if rng.random() < 0.2 else (ED25519_KEY,):
            ours = signed_or_error(message, key, signature_header, unsigned=(b"subject",))
            theirs = signed_or_error(message, key, _signature_header_by_parsing, unsigned=(b"subject",))
            assert ours == theirs, message
    assert 400 < fast < 1100  # both paths were taken often


@pytest.mark.parametrize("now", [0, 7, 1_795_000_000, 12_345_678_901])
@pytest.mark.parametrize("selector", [b"s", b"s1", b"selector-with-a-long-name-2026-11"])
def test_the_signature_is_folded_as_dkimpy_folds_it(now: int, selector: bytes) -> None:
    """Other lengths of t=, d=, s= and b= (RSA-1024, RSA-2048, Ed25519): the same folding as dkim.fold's."""
    message = rendered()
    for domain in (b"example.com", b"a-rather-long-sending-domain.example.com"):
        for algorithm, private in (
            ("rsa", RSA_1024_PRIVATE),
            ("rsa", RSA_KEY.private),
            ("ed25519", ED25519_KEY.private),
        ):
            key = SigningKey(domain, selector, algorithm, private)
            ours = signature_header(message, key, now=now)
            assert ours == _signature_header_by_parsing(message, key, now=now)
            assert ours.startswith(SIGNATURE_NAME + b": ") and ours.endswith(b"\r\n")


def test_insertions_are_found_only_when_there_are_only_insertions() -> None:
    made = Insertions.between(b"abc def", b"ab\r\n c\r\n def")
    assert made is not None and made.apply(b"xyz uvw") == b"xy\r\n z\r\n uvw"
    assert Insertions.between(b"abc", b"abc") == Insertions((slice(0, None),), ())
    assert Insertions.between(b"abc", b"ab") is None  # a byte removed
    assert Insertions.between(b"abc", b"abd") is None  # a byte changed


# Odd input from every side render takes it: custom fields and names with runs of spaces, tabs, line
# breaks and non-ASCII, subjects too long for a line, addresses with non-ASCII local parts.
ODD_VALUES = [
    "",
    "Ann",
    "a  b",
    " lead",
    "trail ",
    "tab\there",
    "two\nlines",
    "cr\rhere",
    "Zoë",
    "日本語",
    "x" * 90,
    "=?utf-8?q?x?=",
    "{{ not a tag }}",
    "\u00a0nbsp",
    "a\x0bb",
    ".",
]


def odd(rng: random.Random, plain: str | None) -> str | None:
    return rng.choice(ODD_VALUES) if rng.random() < 0.5 else plain


def random_rendered(rng: random.Random) -> RenderedMessage | bytes:
    """A rendered email of a random campaign: html or author's text part with merge tags among odd
    literals, Reply-To, List-Id and Feedback-ID or not, a bounce domain (the mailto in
    List-Unsubscribe) or not, and a recipient with odd names and fields."""
    words = [
        "Hello",
        "{{ first_name }}",
        '{{ company | "friend" }}',
        " ",
        "  ",
        "\t",
        "\n",
        "déjà",
        ".",
        "https://example.com/{{ company }}",
        "{{ last_name }}",
        "x" * rng.randint(60, 80),
        *["word", " ", "the ", "news", ", ", "\n", "a b"] * 3,
    ]

    def text(count: int) -> str:
        return "".join(rng.choice(words) for _ in range(rng.randint(0, count)))

    html = f'<p>{text(30)}</p><a href="https://example.com/a?{text(2)}">{text(3)}</a>'
    headers = rng.choice(
        [
            (),
            ("List-Id: <list-1.mail.example.com>", "Feedback-ID: 1:2:1:tidings"),
            ("Feedback-ID: 1:2:0:tidings",),
        ]
    )
    compiled = compile_campaign(
        7,
        text(6) or "Subject",
        html,
        rng.choice(["Zoë Müller", "News", "", "A  very   spaced\tname"]),
        rng.choice(["news@example.com", "news@example.com", "news@exämple.com"]),
        headers,
        text_source=text(40) if rng.random() < 0.4 else None,
        reply_to=rng.choice([None, "desk@example.com"]),
    )
    recipient = Recipient(
        rng.randint(1, 10**6),
        rng.choice(["anaïs@example.org", "ann@example.org", "b@exämple.org", "c@example.org", "d@e.org"]),
        odd(rng, "Ann"),
        odd(rng, None),
        {"company": odd(rng, "Acme")},
    )
    bounce_domain = rng.choice(["", "bounces.example.com"])
    return render(compiled, recipient, TOKENS, BASE, bounce_domain, to_sign=True).message


def test_what_render_tells_the_signer_is_what_reading_the_email_finds() -> None:
    """For random rendered emails, odd input included: each header value render gives is dkimpy's
    relaxed form of that header, its names are the block's, its body start is the body's, and a body
    it calls single-spaced is its own relaxed form."""
    rng = random.Random(51)
    told = single_spaced = 0
    for _ in range(400):
        message = random_rendered(rng)
        facts = message.facts if isinstance(message, RenderedMessage) else None
        if facts is None:
            continue
        end = message.find(b"\r\n\r\n")
        assert facts.body_start == end + 4
        headers = parse_header_block(message[: end + 4])
        assert [name for name, _ in headers] == list(facts.header_names)
        if facts.header_values is not None:
            told += 1
            relaxed = RELAXED.canonicalize_headers(headers)
            assert [value[:-2] for _, value in relaxed] == facts.header_values, message
        if facts.body_single_spaced:
            single_spaced += 1
            body = message[end + 4 :]
            assert RELAXED.canonicalize_body(body) == body, body
    assert told > 150 and single_spaced > 100  # told often, and not always
    assert told < 400 and single_spaced < 400


def test_emails_signed_from_what_render_tells_sign_as_those_read_again() -> None:
    """The same signature, byte for byte, from the facts render gives, from the bytes alone (read by
    _clean_signed_headers) and from the path that parses every header: both key kinds, headers left
    out or not."""
    rng = random.Random(52)
    for n in range(300):
        message = random_rendered(rng)
        key = RSA_KEY if n % 10 == 0 else ED25519_KEY
        unsigned = rng.choice([(), (b"date", b"message-id"), (b"subject",)])
        told = signature_header(message, key, now=NOW, unsigned=unsigned)
        assert told == signature_header(bytes(message), key, now=NOW, unsigned=unsigned), message
        assert told == _signature_header_by_parsing(message, key, now=NOW, unsigned=unsigned), message


def test_the_send_rig_campaign_tells_the_signer_everything() -> None:
    """A plain newsletter (ASCII names, links, List-Id): render gives every header value and calls the
    body single-spaced, so the signer reads neither; and the signature verifies."""
    compiled = compile_campaign(
        1,
        "Hi {{ first_name }}, the news",
        '<p>Hello {{ first_name | "reader" }},</p><p>Read <a href="https://example.com/a">this</a>.</p>',
        "The News",
        "news@example.com",
        ("List-Id: <list-1.mail.example.com>", "Feedback-ID: 1:1:1:tidings"),
    )
    message = render(
        compiled, Recipient(5, "r5@example.org", "First5", "Last5", {}), TOKENS, BASE, to_sign=True
    ).message
    assert isinstance(message, RenderedMessage) and message.facts is not None
    assert message.facts.header_values is not None and message.facts.body_single_spaced
    signed = signature_header(message, RSA_KEY, now=NOW) + message
    assert dkim.DKIM(signed).verify(dnsfunc=dns_of(record_of(RSA_KEY)))
