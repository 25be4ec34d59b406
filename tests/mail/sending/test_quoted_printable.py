"""The text part's quoted-printable: the same bytes as binascii's encoder (with CRLF line endings and
no line starting with "."), whichever way render.py takes to them (plain lines cut by itself, anything
else through binascii)."""

from __future__ import annotations

import binascii
import random

from app.mail.sending.render import _text_part
from app.mail.sending.smtp import DOT_AT_LINE_START, LINE_ENDINGS

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
