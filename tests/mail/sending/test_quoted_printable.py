"""The text part's quoted-printable: the same bytes as binascii's encoder (with CRLF line endings and
no line starting with "."), whichever way render.py takes to them (plain lines cut by itself, anything
else through binascii; a campaign's lines without a hole encoded once, TextPartTemplate)."""

from __future__ import annotations

import binascii
import random

import dkim

from app.mail.sending.render import (
    Recipient,
    Tag,
    Template,
    TextPartTemplate,
    _text_part,
    compile_campaign,
    fill_parts,
    render,
)
from app.mail.sending.smtp import DOT_AT_LINE_START, LINE_ENDINGS
from app.mail.sending.tokens import MailTokens

# Pieces that meet each of binascii's rules: soft breaks at 75 and 76 characters, "=", a lone dot,
# whitespace before a line ending and at the end, control characters, CR, non-ASCII.
PIECES = ["a"] * 30 + [
    "b",
    " ",
    ".",
    "=",
    "\t",
    "\u00e9",
    "\n",
    "\n",
    "\x00",
    "\x7f",
    "\r",
    "-",
    "x" * 74,
    "y" * 75,
    "z" * 76,
    "w" * 150,
]


def binascii_text_part(text: str) -> bytes:
    """What _text_part wrote with binascii alone (before 2026-11-27)."""
    encoded = binascii.b2a_qp(text.encode("utf-8"), istext=True)
    encoded = LINE_ENDINGS.sub(b"\r\n", encoded) if b"\r" in encoded else encoded.replace(b"\n", b"\r\n")
    if encoded.startswith(b".") or b"\n." in encoded:
        encoded = DOT_AT_LINE_START.sub(b"=2E", encoded)
    return encoded


def check(text: str) -> None:
    encoding, content = _text_part(text)
    if encoding == b"quoted-printable":
        assert content == binascii_text_part(text), text


def test_random_texts_are_encoded_as_binascii_encodes_them() -> None:
    rng = random.Random(27)
    for _ in range(20_000):
        check("".join(rng.choice(PIECES) for _ in range(rng.randint(0, 40))))


def test_lines_of_every_length_around_the_soft_breaks() -> None:
    for length in range(320):
        line = ("abc. " * 80)[:length]
        for head in ("", ".", "x\n"):
            for tail in ("", " ", ".", "=", "\u00e9", "\n", "\n.", "\n.x", " \n", "\t"):
                check(head + line + tail)


def test_a_plain_text_part_with_long_lines_reads_back() -> None:
    text = "Hello,\n\n" + "word " * 90 + "end (https://example.com/t/c/" + "A" * 160 + ")\n.\n.dot\n"
    encoding, content = _text_part(text)
    assert encoding == b"quoted-printable"
    assert all(len(line) <= 76 for line in content.split(b"\r\n"))
    assert binascii.a2b_qp(content.replace(b"\r\n", b"\n")).decode() == text


# A text template's literals and values, for TextPartTemplate: every rule above, lines of 74 to 78
# characters that a hole may end or cut, dots at line starts, text that tips the part into base64.
LITERAL_PIECES = [
    *PIECES,
    "",
    "Hello ",
    ", ",
    "\n.",
    ".\n",
    " \n",
    "\t\n",
    "=\n",
    "\n\n",
    *("q" * length for length in range(70, 80)),
    *("\n" + "r" * length for length in range(72, 79)),
    *("s" * length + "\n" for length in range(72, 79)),
    "\u043f\u0440\u0438\u0432\u0435\u0442" * 8,
    "\u20ac",
]
VALUES = [
    "",
    "Ann",
    "Jos\u00e9",
    ".",
    "..",
    "=",
    " ",
    "\t",
    "a ",
    "x" * 75,
    "https://example.com/t/c/" + "A" * 90,
    "\u0416" * 40,
    "line\nbreak",
    "\n",
    "cr\r",
    "nul\x00",
    "\n.",
]


def random_template(rng: random.Random) -> Template:
    holes = rng.randint(0, 6)
    literals = tuple(
        "".join(rng.choice(LITERAL_PIECES) for _ in range(rng.choice([0, 1, 1, 2, 3, 6, 12])))
        for _ in range(holes + 1)
    )
    return Template(literals, tuple(Tag(f"v{index}", "") for index in range(holes)))


RELAXED = dkim.CanonicalizationPolicy.from_c_value(b"relaxed/relaxed")


def encoded(text_part: TextPartTemplate, text: str, filled: list[str]) -> tuple[bytes, bytes]:
    """The template's encoding and content, its word that the content is single-spaced checked: then
    DKIM's relaxed body canonicalisation (dkimpy's) leaves the part, in its place in a body, as it is."""
    encoding, content, single_spaced = text_part.encode(text, filled)
    if single_spaced:
        body = b"--=_b\r\n\r\n" + content + b"\r\n--=_b--\r\n"
        assert RELAXED.canonicalize_body(body) == body, content
    return encoding, content


def test_a_template_encoded_once_and_filled_gives_the_text_part_of_the_filled_text() -> None:
    rng = random.Random(46)
    known_spaced = 0
    for _ in range(6_000):
        template = random_template(rng)
        text_part = TextPartTemplate.of(template)
        for _ in range(4):
            # Mostly plain values (the common case: the encoded lines kept), now and then anything.
            pool = VALUES if rng.random() < 0.5 else VALUES[:2] + VALUES[9:11]
            filled = [rng.choice(pool) for _ in template.holes]
            text = template.join(filled)
            assert encoded(text_part, text, filled) == _text_part(text), (template, filled)
            known_spaced += text_part.encode(text, filled)[2]
    assert known_spaced > 2_000  # the word was given often


def test_single_spaced_is_said_only_of_a_text_part_that_is() -> None:
    """Runs of spaces, tabs and spaces at line ends in the literals and in the values, at either side of
    a hole, on lines cut by soft breaks: the word is never given wrongly (see `encoded`)."""
    rng = random.Random(51)
    pieces = ["a", "b", " ", "  ", "\t", "\n", " \n", "x" * 74, "y" * 75, "Hello ", " ,", "\u00e9"]
    values = ["", "Ann", " ", "  ", "\t", "a ", " a", "a  b", "z" * 75, "\u00e9"]
    said = 0
    for _ in range(3_000):
        holes = rng.randint(0, 4)
        literals = tuple(
            "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8))) for _ in range(holes + 1)
        )
        template = Template(literals, tuple(Tag(f"v{index}", "") for index in range(holes)))
        text_part = TextPartTemplate.of(template)
        for _ in range(3):
            filled = [rng.choice(values) for _ in template.holes]
            text = template.join(filled)
            assert encoded(text_part, text, filled) == _text_part(text), (template, filled)
            said += text_part.encode(text, filled)[2]
    assert said > 500


def test_a_line_cut_at_every_length_before_and_after_a_hole() -> None:
    for length in range(140, 240):
        for head in ("", "a" * 3, ". ", "\u00e9 ", "x=y "):
            line = (head + "word. " * 50)[:length]
            for at in (0, 1, 73, 74, 75, 76, 77, 149, 150, 151, length - 1, length):
                template = Template((line[:at], line[at:] + "\n.next"), (Tag("v", ""),))
                text_part = TextPartTemplate.of(template)
                for value in ("", "Ann", "z" * 75, ". ", "=", "\u00e9"):
                    text = template.join([value])
                    assert encoded(text_part, text, [value]) == _text_part(text), (line, at, value)


def test_a_campaign_renders_the_text_part_of_its_filled_text() -> None:
    text = "Hi {{ first_name }},\n" + "word " * 30 + "{{ email }} (https://example.com/a)\n.end {{ x }}"
    compiled = compile_campaign(1, "Subject", "<p>x</p>", "Us", "us@example.com", text_source=text)
    tokens = MailTokens("k" * 48)
    for first_name, x in [("Ann", "plain"), ("Jos\u00e9", "a = b"), (".", "two\nlines"), ("", " ")]:
        recipient = Recipient(7, "ann@example.com", first_name, None, {"x": x})
        filled = fill_parts(compiled, recipient, tokens, "https://t.example")
        message = render(compiled, recipient, tokens, "https://t.example").message
        assert _text_part(filled.text)[1] in message
