"""What recipients get: merge tags, tracked links, the unsubscribe headers, the plain-text part, and
awkward input (broken or huge html, odd link schemes, unicode names and addresses) that renders or
fails one recipient, never the campaign."""

from __future__ import annotations

import base64
import email
import email.policy
import random
from typing import Any
from urllib.parse import urlsplit

import pytest

from app.mail.sending.render import (
    Recipient,
    _base64_bytes,
    compile_campaign,
    html_to_text,
    multipart_alternative,
    render,
)
from app.mail.sending.smtp import WireMessage
from app.mail.sending.tokens import MailTokens
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list

TOKENS = MailTokens("render-test-secret-key-long-enough-to-sign")
BASE = "https://mail.example.com"


def one(html: str, subject: str = "Hi", **recipient: Any) -> Any:
    compiled = compile_campaign(7, subject, html, "Sender", "news@example.com")
    values = {"deliverable_id": 42, "email": "ann@example.com", "first_name": "Ann", "last_name": None}
    values.update(recipient)
    values.setdefault("fields", {})
    return render(compiled, Recipient(**values), TOKENS, BASE)


def parsed(rendered: Any) -> Any:
    import email
    import email.policy

    return email.message_from_bytes(rendered.message, policy=email.policy.default)


def html_of(rendered: Any) -> str:
    return str(parsed(rendered).get_body(preferencelist=("html",)).get_content())


def text_of(rendered: Any) -> str:
    return str(parsed(rendered).get_body(preferencelist=("plain",)).get_content())


def test_merge_tags_fallbacks_and_custom_fields() -> None:
    rendered = one(
        "<p>{{ first_name }} {{last_name|\"Doe\"}} from {{ Company | 'nowhere' }}, {{ unknown }}!</p>",
        subject="Hello {{ FIRST_NAME }}",
        fields={"company": "Acme"},
    )
    body = html_of(rendered)
    assert "Ann Doe from Acme, !" in body
    assert parsed(rendered)["Subject"] == "Hello Ann"


def test_values_are_escaped_in_html_and_quoted_in_links() -> None:
    rendered = one(
        '<p>{{ first_name }}</p><a href="https://example.com/?who={{ first_name }}">x</a>',
        first_name="<script>&",
    )
    body = html_of(rendered)
    assert "<script>" not in body and "&lt;script&gt;&amp;" in body
    click = next(part for part in body.split('"') if "/t/c/" in part)
    deliverable_id, url = TOKENS.read_click(urlsplit(click).path.rsplit("/", 1)[1]) or (0, "")
    assert deliverable_id == 42
    assert url == "https://example.com/?who=%3Cscript%3E%26"


def test_links_pixel_unsubscribe_headers_and_text_part() -> None:
    rendered = one(
        '<html><body><p>Read <a href="https://example.com/a?x=1&amp;y=2">this</a>, '
        "<a href='mailto:hi@example.com'>write</a>, <a href=\"#top\">top</a>, "
        '<a href=" JavaScript:alert(1)">bad</a> <a href="data:text/html,x">worse</a></p></body></html>'
    )
    message = parsed(rendered)
    body = html_of(rendered)
    tokens = [part.rsplit("/", 1)[1] for part in body.split('"') if "/t/c/" in part]
    assert [TOKENS.read_click(t) for t in tokens] == [(42, "https://example.com/a?x=1&y=2")]
    assert "mailto:hi@example.com" in body and 'href="#top"' in body
    assert "javascript" not in body.lower() and "data:text" not in body
    assert f"{BASE}/t/o/{TOKENS.open_token(42)}" in body
    unsubscribe = f"{BASE}/u/{TOKENS.unsubscribe_token(42)}"
    assert unsubscribe in body
    # Without a bounce domain no mailbox would read a mailto address: the https link alone.
    assert message["List-Unsubscribe"].strip() == f"<{unsubscribe}>"
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    # Under the From domain, and opaque: only the secret key reads the deliverable back from it.
    assert message["Message-ID"] == rendered.message_id
    token, _, domain = rendered.message_id.strip("<>").partition("@")
    assert domain == "example.com" and len(token) == 32
    assert TOKENS.read_message_id_token(token) == 42
    assert MailTokens("another-secret-key-long-enough-to-sign").read_message_id_token(token) is None
    text = text_of(rendered)
    assert "Read this (https://mail.example.com/t/c/" in text
    assert f"Unsubscribe: {unsubscribe}" in text
    assert "<" not in text.replace("<mailto", "")


def test_own_unsubscribe_tag_replaces_the_footer() -> None:
    rendered = one('<p><a href="{{ unsubscribe_url }}">Leave</a></p>')
    body = html_of(rendered)
    assert body.count("/u/") == 1 and "Leave" in body


def test_broken_and_huge_html_render() -> None:
    broken = one('<p><b>unclosed <a href="https://example.com/x">link <div></table>& < > {{ first_name')
    assert "/t/c/" in html_of(broken)
    assert "unclosed" in text_of(broken)
    huge = one("<p>" + "word " * 199_990 + "</p>")
    assert len(html_of(huge)) > 999_000


def test_unicode_names_subject_and_addresses() -> None:
    rendered = one(
        "<p>Grüße {{ first_name }}</p>",
        subject="Grüße, {{ first_name }} 👋",
        email="josé@exämple.com",
        first_name="Zoë",
        last_name='O"Brien',
    )
    message = parsed(rendered)
    assert message["Subject"] == "Grüße, Zoë 👋"
    assert rendered.envelope_to == "josé@xn--exmple-cua.com"
    assert message["To"].addresses[0].display_name == 'Zoë O"Brien'
    assert "Grüße Zoë" in html_of(rendered)


def test_html_to_text_skips_scripts_and_keeps_blocks() -> None:
    text = html_to_text(
        "<style>p{}</style><h1>Title</h1><p>One</p><ul><li>a</li><li>b</li></ul><script>x</script>"
    )
    assert text == "Title\n\nOne\n\n- a\n\n- b"


def test_awkward_contacts_all_receive_the_campaign(
    client: Any, api_user: Any, sender: Sender, smtp_sink: SmtpSink
) -> None:
    emails = ["josé@exämple.com", "plain@example.com"]
    campaign_id = campaign_with_list(
        client,
        api_user.headers,
        emails,
        html='<p>{{ first_name | "Ünïcødé" }} <a href="vbscript:x">v</a> <a href="ftp://example.com/f">f</a>'
        '<a href="https://example.com/ü?q=ä b">u</a>',
    )
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    assert sender.drain() == 2
    received = sorted(r.recipients[0] for r in smtp_sink.received)
    assert received == ["josé@xn--exmple-cua.com", "plain@example.com"]
    html = smtp_sink.to("plain@example.com")[0].part("html")
    assert "Ünïcødé" in html and "ftp://example.com/f" in html and "vbscript" not in html


def test_sending_during_warm_up_is_403(client: Any, make_user: Any) -> None:
    warming = make_user(warmup_days=2)
    campaign_id = campaign_with_list(client, warming.headers, ["w@example.com"])
    response = client.post(f"/campaigns/{campaign_id}/send", headers=warming.headers)
    assert response.status_code == 403
    assert "warming up" in response.json()["message"]


def test_braces_written_as_character_references_stay_braces_in_both_parts() -> None:
    # The html shows `{{ email }}` to the reader; the text part must too, not the recipient's address.
    rendered = one(
        "<p>Literal &#123;&#123; email &#125;&#125;, hex &#x7B;&#x7b;email&#x7D;&#x7d;, named "
        "&lcub;&lbrace; last_name &rcub;&rbrace;; a real {{ first_name }}; &#1234; stays</p>"
        '<a href="https://example.com/?q=&#123;&#123;email&#125;&#125;">search</a>'
    )
    text = text_of(rendered)
    assert "Literal {{ email }}, hex {{email}}, named {{ last_name }}; a real Ann; \u04d2 stays" in text
    assert "ann@example.com" not in text
    body = html_of(rendered)
    assert "Literal &#123;&#123; email &#125;&#125;" in body and "a real Ann" in body
    assert "ann@example.com" not in body
    # Nor does a link's URL take the recipient's address from an escaped pair of braces.
    click = next(part for part in body.split('"') if "/t/c/" in part)
    _, url = TOKENS.read_click(urlsplit(click).path.rsplit("/", 1)[1]) or (0, "")
    assert url == "https://example.com/?q={{email}}"


def test_a_mostly_ascii_text_part_is_quoted_printable_and_another_script_base64() -> None:
    """Spam filters score base64 plain text; quoted-printable of mostly ASCII text reads as it is. The
    message stays ready for DATA as it is: CRLF only, no line starting with "." (not dot-stuffed)."""
    texts = {
        "quoted-printable": "Price = 10 EUR, caf\u00e9 \n.a line with a dot\ntrailing space \n"
        + "long " * 40,
        "base64": "\u041f\u0440\u0438\u0432\u0435\u0442, \u043a\u0430\u043a \u0434\u0435\u043b\u0430?\n",
    }
    for encoding, text in texts.items():
        message = multipart_alternative(["From: <a@example.com>", "Subject: s"], text, "<p>x</p>")
        assert isinstance(message, WireMessage)
        assert message.count(b"\n") == message.count(b"\r\n") and b"\n." not in message
        assert all(len(line) <= 78 for line in message.split(b"\r\n"))
        parsed: Any = email.message_from_bytes(message, policy=email.policy.strict)
        part = parsed.get_body(("plain",))
        assert part["Content-Transfer-Encoding"] == encoding
        assert part.get_content().replace("\r\n", "\n") == text


@pytest.mark.parametrize(
    ("headers", "ready"),
    [
        (["From: <a@example.com>", "List-Unsubscribe:\r\n <https://x.example/u>"], True),
        (["From: <a@example.com>", "Subject: a\nb"], False),
        (["From: <a@example.com>", "Subject: a\r"], False),
        (["From: <a@example.com>\r", "\nSubject: b"], False),
        (["From: <a@example.com>", ".Subject: b"], False),
        (["From: <a@example.com>", "Subject: a\r\n.b"], False),
        ([".From: <a@example.com>"], False),
    ],
)
def test_a_message_is_ready_for_data_only_when_its_headers_break_lines_by_crlf_and_start_none_with_a_dot(
    headers: list[str], ready: bool
) -> None:
    """The headers are checked joined, as they are written: a bare CR or LF anywhere, or a line starting
    with "." (DATA would end there), leaves the message to SMTP's own fixing (smtp._content)."""
    message = multipart_alternative(headers, "text", "<p>html</p>")
    assert isinstance(message, WireMessage) is ready


@pytest.mark.parametrize("size", [0, 1, 2, 3, 56, 57, 58, 114, 3819, 9000, 300_000, 1_000_003])
def test_base64_parts_are_the_standard_librarys_lines_with_crlf(size: int) -> None:
    """pybase64 cuts the lines: the same bytes as base64.encodebytes, CRLF between lines and none after
    the last, for empty, short, exactly full and long parts (a part of 1 MB included)."""
    data = random.Random(size).randbytes(size)
    expected = base64.encodebytes(data).replace(b"\n", b"\r\n")[:-2]
    encoded = _base64_bytes(data)
    assert encoded == expected
    assert base64.b64decode(encoded) == data
    assert all(len(line) <= 76 for line in encoded.split(b"\r\n"))
