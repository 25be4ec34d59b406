"""Render one campaign for one contact: merge tags, tracked links, open pixel, unsubscribe, plain text, MIME.

A campaign is compiled once per worker (`compile_campaign`): its html is cut into literal pieces, merge
tags and links, and its plain-text twin is made once from the html; each part becomes a `Template`, its
literal text around the holes to fill, and the text part's quoted-printable is encoded then but for the
lines holding a hole (`TextPartTemplate`). Each recipient then costs one join per part, one HMAC per
link, the html's base64 and the rest of the text's quoted-printable; that is what lets one worker send
thousands of emails a second.

Merge tags (what authors of campaigns can rely on):
- `{{ first_name }}`, `{{ last_name }}`, `{{ email }}` and any custom contact field by name
  (`{{ company }}`); names are matched without regard to case.
- A fallback after a pipe for an empty or unknown value: `{{ first_name | "friend" }}` (quotes optional).
- `{{ unsubscribe_url }}` places the unsubscribe link; without it a footer with the link is added,
  and a "view in browser" link beside it.
- `{{ web_version_url }}` places the "view in browser" link: a signed page showing the email as this
  reader got it (app/mail/web_version_service.py).
Links: every `http(s)` href becomes a signed redirect through `/t/c/...` that goes only to that URL.
A text part its author wrote is used as written (merge tags filled, its bare `http(s)` URLs tracked
like the html's links); without one the text part is made from the html. A preheader goes first in the
html's body, hidden, and an open pixel last unless the campaign or its account turned it off.
`mailto:`, `tel:` and other harmless schemes are left alone; `javascript:`, `vbscript:` and `data:`
hrefs are replaced by `#`. Values are HTML-escaped in the html part, URL-quoted inside a link.
"""

from __future__ import annotations

import binascii
import html
import operator
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.header import Header
from email.utils import formatdate
from functools import lru_cache
from html.parser import HTMLParser
from typing import Literal, NamedTuple
from urllib.parse import quote, urlsplit

import pybase64

from app.mail.sending.smtp import LINE_ENDINGS, WireMessage
from app.mail.sending.tokens import MailTokens
from app.models import Campaign

MERGE_TAG = re.compile(r"\{\{\s*([^{}|]+?)\s*(?:\|\s*([^{}]*?)\s*)?\}\}")
HREF = re.compile(r"""(<a\b[^>]*?\bhref\s*=\s*)(["'])(.*?)\2""", re.IGNORECASE | re.DOTALL)
BODY_END = re.compile(r"</body\s*>", re.IGNORECASE)
BODY_START = re.compile(r"<body\b[^>]*>", re.IGNORECASE)
# A bare URL in a hand-written text part (merge tags may sit inside it); trailing punctuation is the
# sentence's, not the URL's.
TEXT_URL = re.compile(r"https?://(?:[^\s<>\"'{}()]|\{\{[^{}]*\}\})+", re.IGNORECASE)
URL_TRAILING_PUNCTUATION = ".,;:!?"
# The preheader: shown by inboxes after the subject, never in the opened email. The run of zero-width
# joiners after it keeps inboxes from filling the rest of the preview with the body's first words.
PREHEADER_STYLE = (
    "display:none;font-size:1px;line-height:1px;max-height:0;max-width:0;opacity:0;overflow:hidden;"
    "mso-hide:all"
)
PREHEADER_PADDING = "&#847;&zwnj;&nbsp;" * 40
# Markers the compiler leaves in the html and text while it cuts them into pieces; NUL never survives
# the API's input checks, so an author cannot write one.
MARKER = re.compile(r"\x00(L\d+|P|U|W)\x00")
# A brace the html writes as a character reference (`&#123;`, `&#x7D;`, `&lcub;`) is text, never half of
# a merge tag: the watch `email` action writes an item's braces so. The compiler swaps each for a
# NUL-led stand-in before anything decodes the html (the text part, a link's URL), and puts the brace
# back in the literal pieces once the merge tags are found.
BRACE_REFERENCE = re.compile(
    r"&(?:#0*(?:123|125)(?![0-9])|#[xX]0*(?:7[bBdD])(?![0-9a-fA-F]));?|&(?:lcub|lbrace|rcub|rbrace);"
)
BRACE_STAND_INS = {"{": "\x00[", "}": "\x00]"}
UNSUBSCRIBE_TAG = "unsubscribe_url"
WEB_VERSION_TAG = "web_version_url"
UNSAFE_SCHEMES = ("javascript:", "vbscript:", "data:")
CRLF = "\r\n"
CRLF_BYTES = b"\r\n"
# Quoted-printable: the longest line, and each byte's class for _text_part: 1 for a byte written as a code
# (not printable ASCII, or "="), 0 for space and tab (written as codes at the end of a line), else
# itself.
QP_LINE = 76
QP_MARKS = bytes(
    0 if byte in b" \t" else byte if byte == 0x0A or (0x20 < byte < 0x7F and byte != ord("=")) else 1
    for byte in range(256)
)
# A "." starting a line of quoted-printable, to escape: the regex finds it in a third of bytes.replace's
# time (its search skips ahead on the line break, rarer than the dot, where bytes' search stalls on
# letters that share the dot's bit in its filter).
DOT_AFTER_LINE_BREAK = re.compile(rb"\n\.")
# A line's last byte, taken without a Python call a line.
LAST_BYTE = operator.itemgetter(slice(-1, None))
# The slices that cut a long plain line into 75 characters a soft break, made once (lines up to 75 KB).
QP_CHUNKS = [slice(start, start + QP_LINE - 1) for start in range(0, 75_000, QP_LINE - 1)]
WHITESPACE = re.compile(r"\s+")
# The local part of a VERP envelope sender before its token.
VERP_PREFIX = "bounces+"
# The List-Unsubscribe mailto address, `unsubscribe+<signed deliverable id>@<bounce domain>`: mail to it
# reaches the bounce mailbox, which unsubscribes that email's contact (bounce_mailbox.py).
UNSUBSCRIBE_PREFIX = "unsubscribe+"
# The headers whose values `render` writes for each email (From's is the campaign's), in the order it
# writes them; List-Unsubscribe-Post, the campaign's own headers (campaign_headers) and MIME-Version
# follow, joined once a campaign (HeadLayout).
VARYING_HEADER_NAMES = ("From", "To", "Subject", "Date", "Message-ID", "List-Unsubscribe")
ONE_CLICK = "List-Unsubscribe-Post: List-Unsubscribe=One-Click"
MIME_VERSION = "MIME-Version: 1.0"
# Two spaces: the regular expression finds them in half the time of `in` where single spaces are
# frequent (bytes' search stops at each one).
RUN_OF_SPACES = re.compile(rb"  ")
# For _single_spaced_values: a space and a line feed (which separates two values) become a space,
# any other printable ASCII byte an "x", and every other byte "!".
SPACING = bytes(0x20 if byte in b" \n" else 0x78 if 0x20 < byte < 0x7F else 0x21 for byte in range(256))


@dataclass(frozen=True, slots=True)
class Tag:
    name: str
    fallback: str


@dataclass(frozen=True, slots=True)
class Link:
    index: int


@dataclass(frozen=True, slots=True)
class Slot:
    what: Literal["pixel", "unsubscribe", "web_version"]


Piece = str | Tag | Link | Slot
Hole = Tag | Link | Slot


@dataclass(frozen=True, slots=True)
class Template:
    """A part ready to fill: `literals[i]` comes before `holes[i]`, and one literal more closes it."""

    literals: tuple[str, ...]
    holes: tuple[Hole, ...]

    @classmethod
    def of(cls, pieces: list[Piece]) -> Template:
        literals: list[str] = [""]
        holes: list[Hole] = []
        for piece in pieces:
            if isinstance(piece, str):
                literals[-1] += piece
            else:
                holes.append(piece)
                literals.append("")
        return cls(tuple(literals), tuple(holes))

    def fill(
        self,
        values: Mapping[str, str],
        link_urls: list[str],
        slots: Mapping[str, str],
        escape: Callable[[str], str] | None,
    ) -> str:
        filled = self.hole_values(values, link_urls, slots)
        if escape is not None:
            filled = [escape(value) for value in filled]
        return self.join(filled)

    def hole_values(
        self, values: Mapping[str, str], link_urls: list[str], slots: Mapping[str, str]
    ) -> list[str]:
        """What fills each hole, unescaped."""
        return [
            (values.get(hole.name) or hole.fallback)
            if isinstance(hole, Tag)
            else link_urls[hole.index]
            if isinstance(hole, Link)
            else slots[hole.what]
            for hole in self.holes
        ]

    def join(self, filled: list[str]) -> str:
        """The literals with `filled[i]` in hole i."""
        if not self.holes:
            return self.literals[0]
        out = [""] * (2 * len(self.holes) + 1)
        out[0::2] = self.literals
        out[1::2] = filled
        return "".join(out)


@dataclass(frozen=True, slots=True)
class TextPartTemplate:
    """The text part's encoding, made once a campaign as far as it can be. Quoted-printable is
    line-local (binascii.b2a_qp decides a soft break, a line's trailing whitespace and a lone "."
    within the line, and our "=2E" for a leading "." is per line too), so the lines of the text that
    hold no hole are encoded here once, and so is the start of a line before its first hole, down to
    its last soft break that no value can move; each email encodes only the rest of the lines that
    hold a hole, and joins. The same bytes as `_text_part(text)` (tests/mail/sending/
    test_quoted_printable.py); a text that goes in base64, a value holding a line break or a CR, a
    literal holding a CR: the text encoded whole, as before."""

    # The part itself when the text holds no hole.
    constant: tuple[bytes, bytes] | None
    # The lines holding a hole, less their encoded starts, one after another ("\n" between them); None
    # when a literal holds a CR (binascii's line endings then depend on the whole text).
    lines: Template | None
    # Encoded once: what comes before each line of `lines` (its encoded start last), and what follows
    # the last.
    fixed: tuple[bytes, ...]
    # The UTF-8 bytes of the filled text beyond the filled `lines`'s (for the choice of base64).
    more_bytes: int
    # Whether the last line of `lines` ends the text (binascii's end-of-data rules).
    ends_text: bool
    # Whether the encoded pieces made once (`constant`, or every one of `fixed`) are single-spaced
    # (_single_spaced): then only what each email encodes is searched for runs of spaces and tabs.
    fixed_single_spaced: bool = False

    @classmethod
    def of(cls, text: Template) -> TextPartTemplate:
        if not text.holes:
            constant = _text_part(text.literals[0])
            return cls(constant, None, (), 0, False, _single_spaced(constant[1]))
        if any("\r" in literal for literal in text.literals):
            return cls(None, None, (), 0, False)
        # The text's lines, each its literal pieces with a hole (None) between two of them.
        text_lines: list[list[str | None]] = [[]]
        for index, literal in enumerate(text.literals):
            first, *others = literal.split("\n")
            text_lines[-1].append(first)
            text_lines.extend([other] for other in others)
            if index < len(text.holes):
                text_lines[-1].append(None)
        line_literals: list[str] = []
        fixed: list[bytes] = []
        hole_free: list[str] = []
        for line in text_lines:
            if len(line) == 1:
                hole_free.append(line[0] or "")
                continue
            between = ("\n" if fixed else "") + "".join(f"{hole_free_line}\n" for hole_free_line in hole_free)
            start, rest = _soft_broken_start(line[0] or "")
            fixed.append(_quoted_printable(between.encode("utf-8")) + start)
            if line_literals:
                line_literals[-1] += "\n" + rest
            else:
                line_literals.append(rest)
            line_literals.extend(piece for piece in line[2::2] if piece is not None)
            hole_free = []
        fixed.append(_quoted_printable("".join(f"\n{line}" for line in hole_free).encode("utf-8")))
        lines = Template(tuple(line_literals), text.holes)
        more_bytes = sum(len(literal.encode("utf-8")) for literal in text.literals) - sum(
            len(literal.encode("utf-8")) for literal in line_literals
        )
        fixed_single_spaced = all(map(_single_spaced, fixed))
        return cls(None, lines, tuple(fixed), more_bytes, not hole_free, fixed_single_spaced)

    def encode(self, text: str, filled: list[str], spacing: bool = True) -> tuple[bytes, bytes, bool]:
        """The part's encoding and content for `text`, this template filled with `filled`, and whether
        the content is known to be single-spaced (_single_spaced; False: not known, and never looked
        for without `spacing`: only the DKIM signer wants it)."""
        if self.constant is not None:
            return (*self.constant, self.fixed_single_spaced)
        if self.lines is None:
            return _text_part_not_known_spaced(text)
        data = self.lines.join(filled).encode("utf-8")
        size = len(data) + self.more_bytes
        each = data.split(b"\n")
        if (size - len(text)) * 8 > size or len(each) != len(self.fixed) - 1:
            return _text_part_not_known_spaced(text)  # base64, or a value holding a line break
        # _quoted_printable's test for plain lines, whitespace at their ends read off their last bytes
        # (quicker than searching the text for whitespace before a line break).
        last_bytes = b"".join(map(LAST_BYTE, each))
        if b"\x01" in data.translate(QP_MARKS) or b" " in last_bytes or b"\t" in last_bytes:
            if b"\r" in data:
                return _text_part_not_known_spaced(text)
            # Each line as it is in the text: followed by a line break, but the text's last.
            encoded = [_quoted_printable(line + b"\n")[:-2] for line in each]
            if self.ends_text:
                encoded[-1] = _quoted_printable(each[-1])
            single_spaced = False  # not known: binascii wrote these lines
        else:
            encoded = [line if len(line) <= QP_LINE else _soft_breaks(line) for line in each]
            # The lines are as they are in `data` but for soft breaks ("=" and CRLF, which neither make
            # nor break a run of spaces) and end in neither space nor tab (tested above), and no fixed
            # piece does: a run of spaces or a tab is within one piece, and each fixed one has none.
            single_spaced = (
                spacing and self.fixed_single_spaced and not RUN_OF_SPACES.search(data) and b"\t" not in data
            )
        out = [b""] * (2 * len(encoded) + 1)
        out[0::2] = self.fixed
        out[1::2] = encoded
        # Escaping a leading "." changes no space nor what follows one.
        return b"quoted-printable", _leading_dots_escaped(b"".join(out)), single_spaced


@dataclass(frozen=True, slots=True)
class HeadLayout:
    """A campaign's header lines after the VARYING_HEADER_NAMES, joined (`constant_lines`). For the
    DKIM signer (see MessageFacts), the names of all the headers render writes, in order, Content-Type
    last, and the values of the constant ones, each its own relaxed form; both None when a constant
    one is not single-spaced or not `Name: value` (the signer then reads the block itself)."""

    constant_lines: str
    names: tuple[bytes, ...] | None
    constant_values: tuple[bytes, ...] | None

    @classmethod
    def of(cls, campaign_headers: tuple[str, ...]) -> HeadLayout:
        constant = [ONE_CLICK, *campaign_headers, MIME_VERSION]
        split = [header.partition(": ") for header in constant]
        values = _single_spaced_values([value for _, _, value in split])
        if values is None or not all(separator and name.isascii() for name, separator, _ in split):
            return cls(CRLF.join(constant), None, None)
        names = [*VARYING_HEADER_NAMES, *(name for name, _, _ in split), "Content-Type"]
        return cls(CRLF.join(constant), tuple(name.encode("ascii") for name in names), tuple(values))


@dataclass(frozen=True, slots=True)
class CompiledCampaign:
    campaign_id: int
    subject: list[Piece]
    html: list[Piece]
    text: list[Piece]
    links: list[list[Piece]]
    from_header: str
    from_email: str
    uses_custom_fields: bool
    subject_template: Template
    html_template: Template
    text_template: Template
    text_part: TextPartTemplate
    # The URL of each link, or None when merge tags make it differ by recipient.
    fixed_link_urls: tuple[str | None, ...]
    head_layout: HeadLayout
    # Headers the same for every email of the campaign (List-Id, Feedback-ID, Reply-To).
    campaign_headers: tuple[str, ...] = ()
    tracks_opens: bool = True
    # The From address's domain, lowercased: the relay to use may depend on it (transport.py).
    from_domain: str = ""
    # Whether a part links to the web version (its merge tag or the default footer): its token is
    # made only then.
    links_web_version: bool = False


@dataclass(frozen=True, slots=True)
class Recipient:
    deliverable_id: int
    email: str
    first_name: str | None
    last_name: str | None
    # Custom field values by lowercased field name.
    fields: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Rendered:
    envelope_from: str
    envelope_to: str
    message: bytes
    message_id: str
    # The From address's domain: a sending domain may have relays of its own (TIDINGS_SMTP_URL).
    sending_domain: str = ""


class MessageFacts(NamedTuple):
    """What render knows of an email it wrote, which the DKIM signer (dkim.py) would otherwise learn by
    reading it again: the names of its headers in order; their values, each its own relaxed form
    (unfolded, printable ASCII, single-spaced, nothing around it; None when render does not know them
    so); where the body starts; and whether the body is single-spaced (no tab, no run of spaces, no
    space before a line end), which makes it its own relaxed form too (it ends with one CRLF). A named
    tuple: made for every email, and a tuple is made quickest."""

    header_names: tuple[bytes, ...]
    header_values: list[bytes] | None
    body_start: int
    body_single_spaced: bool


class RenderedMessage(WireMessage):
    """An email as render wrote it, with its facts. Anything made of its bytes (a slice, a join) is
    plain bytes again, without them: they describe these bytes only."""

    # Set once made (bytes' own constructor, quicker than one in Python).
    facts: MessageFacts | None = None


STANDARD_FIELDS = {"first_name", "last_name", "email", UNSUBSCRIBE_TAG, WEB_VERSION_TAG}


def campaign_headers(
    campaign_id: int, account_id: int, list_id: int | None, base_url: str
) -> tuple[str, ...]:
    """List-Id (RFC 2919: receivers such as rspamd score mail to a list without one) for the campaign's
    first list, and Feedback-ID in the form Gmail's Postmaster Tools groups by
    (`campaign:account:list:sender`), both under the host of the base URL."""
    host = _host_of(base_url)
    headers = [f"Feedback-ID: {campaign_id}:{account_id}:{list_id or 0}:tidings"]
    if list_id is not None:
        headers.insert(0, f"List-Id: <list-{list_id}.{host}>")
    return tuple(headers)


def compile_campaign(
    campaign_id: int,
    subject: str,
    html_source: str,
    from_name: str,
    from_email: str,
    headers: tuple[str, ...] = (),
    *,
    text_source: str | None = None,
    preheader: str | None = None,
    reply_to: str | None = None,
    track_opens: bool = True,
) -> CompiledCampaign:
    """The campaign cut into templates. `text_source` is the author's text part (None or blank: made
    from the html); `track_opens` False leaves the open pixel out."""
    links: list[list[Piece]] = []

    def take_href(match: re.Match[str]) -> str:
        prefix, quote_char, raw = match.group(1), match.group(2), match.group(3)
        url = html.unescape(_brace_references_kept(raw)).strip()
        lowered = url.lower()
        if lowered.startswith(UNSAFE_SCHEMES):
            return f"{prefix}{quote_char}#{quote_char}"
        if lowered.startswith(("http://", "https://")):
            links.append(_pieces(url))
            return f"{prefix}{quote_char}\x00L{len(links) - 1}\x00{quote_char}"
        return match.group(0)

    body = HREF.sub(take_href, html_source)
    has_unsubscribe = _has_unsubscribe_tag(html_source)
    if text_source and text_source.strip():
        text = _tracked_text_links(text_source.strip(), links)
        text_has_unsubscribe = _has_unsubscribe_tag(text_source)
    else:
        text = html_to_text(_brace_references_kept(body))
        text_has_unsubscribe = has_unsubscribe
    if not has_unsubscribe:
        footer = (
            '<p style="font-size:12px;color:#666"><a href="\x00W\x00">View in browser</a> &middot; '
            '<a href="\x00U\x00">Unsubscribe</a></p>'
        )
        body = _before_body_end(body, footer)
    if not text_has_unsubscribe:
        text += "\n\n--\nView in browser: \x00W\x00\nUnsubscribe: \x00U\x00\n"
    if preheader and preheader.strip():
        body = _after_body_start(body, _preheader_html(preheader.strip()))
    if track_opens:
        body = _before_body_end(body, '<img src="\x00P\x00" width="1" height="1" alt="" style="border:0">')
    if reply_to:
        headers = (*headers, f"Reply-To: {_address_header('', _ascii_domain(reply_to))}")
    html_pieces = _pieces(body)
    subject_pieces = _pieces(subject)
    text_pieces = _pieces(text)
    text_template = Template.of(text_pieces)
    tag_names = {p.name for p in [*html_pieces, *subject_pieces, *text_pieces] if isinstance(p, Tag)}
    tag_names |= {p.name for link in links for p in link if isinstance(p, Tag)}
    return CompiledCampaign(
        campaign_id=campaign_id,
        subject=subject_pieces,
        html=html_pieces,
        text=text_pieces,
        links=links,
        from_header=_address_header(from_name, from_email),
        from_email=_ascii_domain(from_email),
        uses_custom_fields=bool(tag_names - STANDARD_FIELDS),
        subject_template=Template.of(subject_pieces),
        html_template=Template.of(html_pieces),
        text_template=text_template,
        text_part=TextPartTemplate.of(text_template),
        fixed_link_urls=tuple(
            None if any(isinstance(p, Tag) for p in link) else _join_url(link, {}) for link in links
        ),
        head_layout=HeadLayout.of(headers),
        campaign_headers=headers,
        tracks_opens=track_opens,
        from_domain=_ascii_domain(from_email).rpartition("@")[2].lower(),
        links_web_version=WEB_VERSION_TAG in tag_names
        or any(isinstance(p, Slot) and p.what == "web_version" for p in [*html_pieces, *text_pieces]),
    )


def compile_stored(
    campaign: Campaign, *, account_tracks_opens: bool, headers: tuple[str, ...] = (), subject_prefix: str = ""
) -> CompiledCampaign:
    """A stored campaign compiled, its parts as its author set them: what the send worker, the preview
    and the test send all make of it."""
    return compile_campaign(
        campaign.id,
        subject_prefix + campaign.subject,
        campaign.html,
        campaign.from_name,
        campaign.from_email,
        headers,
        text_source=campaign.text,
        preheader=campaign.preheader,
        reply_to=campaign.reply_to,
        track_opens=campaign.track_opens and account_tracks_opens,
    )


def with_fallbacks(source: str) -> str:
    """A text's merge tags filled for a reader without names: each shows its fallback."""
    return Template.of(_pieces(source)).fill({}, [], {}, None)


def _has_unsubscribe_tag(source: str) -> bool:
    return any(match.group(1).strip().lower() == UNSUBSCRIBE_TAG for match in MERGE_TAG.finditer(source))


def _tracked_text_links(text: str, links: list[list[Piece]]) -> str:
    """The author's text part with each bare http(s) URL swapped for a link marker (added to `links`)."""

    def take_url(match: re.Match[str]) -> str:
        url = match.group(0).rstrip(URL_TRAILING_PUNCTUATION)
        links.append(_pieces(url))
        return f"\x00L{len(links) - 1}\x00{match.group(0)[len(url) :]}"

    return TEXT_URL.sub(take_url, text)


def _preheader_html(preheader: str) -> str:
    # quote=False: a merge tag's quoted fallback stays quoted (the filled values are escaped at send).
    return f'<div style="{PREHEADER_STYLE}">{html.escape(preheader, quote=False)}{PREHEADER_PADDING}</div>'


@dataclass(frozen=True, slots=True)
class Filled:
    subject: str
    html: str
    text: str
    unsubscribe_url: str
    # What fills each hole of the text (CompiledCampaign.text_part encodes the text from them).
    text_values: list[str]


def fill_parts(compiled: CompiledCampaign, recipient: Recipient, tokens: MailTokens, base_url: str) -> Filled:
    """The campaign's parts for one recipient: merge tags, signed links, pixel, unsubscribe and web
    version links filled (what `render` wraps in a message, and the web version shows)."""
    deliverable_id = recipient.deliverable_id
    values = _values(recipient)
    unsubscribe_url = f"{base_url}/u/{tokens.unsubscribe_token(deliverable_id)}"
    values[UNSUBSCRIBE_TAG] = unsubscribe_url
    link_urls = [
        f"{base_url}/t/c/{tokens.click_token(deliverable_id, fixed or _join_url(link, values))}"
        for link, fixed in zip(compiled.links, compiled.fixed_link_urls, strict=True)
    ]
    slots = {"unsubscribe": unsubscribe_url}
    if compiled.tracks_opens:
        slots["pixel"] = f"{base_url}/t/o/{tokens.open_token(deliverable_id)}"
    if compiled.links_web_version:
        slots["web_version"] = values[WEB_VERSION_TAG] = (
            f"{base_url}/w/{tokens.web_version_token(deliverable_id, compiled.campaign_id)}"
        )
    text_values = compiled.text_template.hole_values(values, link_urls, slots)
    return Filled(
        subject=compiled.subject_template.fill(values, link_urls, slots, None),
        html=compiled.html_template.fill(values, link_urls, slots, html.escape),
        text=compiled.text_template.join(text_values),
        unsubscribe_url=unsubscribe_url,
        text_values=text_values,
    )


def render(
    compiled: CompiledCampaign,
    recipient: Recipient,
    tokens: MailTokens,
    base_url: str,
    bounce_domain: str = "",
    *,
    to_sign: bool = False,
) -> Rendered:
    """The email for one recipient. With a bounce domain (TIDINGS_BOUNCE_DOMAIN), its envelope sender
    is the VERP address `bounces+<signed deliverable id>@<bounce domain>`, so a bounce names the email it
    is about (app/mail/bounces/bounce_mailbox.py); without one, the campaign's from address.

    The message is a WireMessage when its headers are ready for DATA as they are; `to_sign` (a DKIM key
    will sign it) makes it a RenderedMessage, which takes what render knows of it to the signer
    (MessageFacts): 4 to 8 us an email that an email not signed does not pay."""
    deliverable_id = recipient.deliverable_id
    filled = fill_parts(compiled, recipient, tokens, base_url)
    subject, html_body = filled.subject, filled.html
    unsubscribe_url = filled.unsubscribe_url
    host = _host_of(base_url)
    mailto = _unsubscribe_mailto(tokens, deliverable_id, bounce_domain)
    # Under the From domain (what receivers expect of a sender's own mail); opaque (tokens.py).
    message_id = f"<{tokens.message_id_token(deliverable_id)}@{compiled.from_domain or host}>"
    to_email = _ascii_domain(recipient.email)
    name = " ".join(part for part in (recipient.first_name, recipient.last_name) if part)
    to = _address_header(name, to_email)
    subject_text = _header_text(subject)
    date = _date_header()
    unsubscribe = f"<{unsubscribe_url}>{mailto}"
    layout = compiled.head_layout
    # The VARYING_HEADER_NAMES in their order, then the campaign's constant lines.
    head = (
        f"From: {compiled.from_header}\r\nTo: {to}\r\nSubject: {subject_text}\r\nDate: {date}\r\n"
        f"Message-ID: {message_id}\r\n"
        # Folded (RFC 5322 wants lines under 78 characters): each address on a line of its own.
        f"List-Unsubscribe:\r\n {unsubscribe}\r\n{layout.constant_lines}"
    )
    text_encoding, text_part, text_single_spaced = compiled.text_part.encode(
        filled.text, filled.text_values, to_sign
    )
    head_bytes = head.encode("utf-8")
    boundary = _boundary()
    content_type = _content_type(boundary)
    message: bytes = _multipart(head_bytes, content_type, boundary, text_encoding, text_part, html_body)
    if _wire_safe(head):
        varying = [compiled.from_header, to, subject_text, date, message_id, unsubscribe]
        message = (
            _signable(message, layout, varying, len(head_bytes), content_type, text_single_spaced)
            if to_sign
            else WireMessage(message)
        )
    envelope_from = (
        f"{VERP_PREFIX}{tokens.verp_token(deliverable_id)}@{bounce_domain}"
        if bounce_domain
        else compiled.from_email
    )
    return Rendered(envelope_from, to_email, message, message_id, compiled.from_domain)


def _signable(
    message: bytes,
    layout: HeadLayout,
    varying: list[str],
    head_length: int,
    content_type: bytes,
    text_single_spaced: bool,
) -> RenderedMessage:
    """`message`, whose header lines (`head_length` bytes, the VARYING_HEADER_NAMES' values `varying`
    and then `layout`'s) are followed by Content-Type, with what render knows of it (MessageFacts)."""
    header_values = None
    if layout.names is not None and layout.constant_values is not None:
        varying_values = _single_spaced_values(varying)
        if varying_values is not None:
            # The boundary's hex digits leave Content-Type single-spaced.
            header_values = [*varying_values, *layout.constant_values, content_type]
    signable = RenderedMessage(message)
    signable.facts = MessageFacts(
        layout.names or (),
        header_values,
        head_length + len(CONTENT_TYPE_PREFIX) + len(content_type) + 6,  # the CRLFs around it
        # The rest of the body is MIME headers without a run of spaces, boundaries and base64.
        text_single_spaced,
    )
    return signable


def _single_spaced_values(values: list[str]) -> list[bytes] | None:
    """Header values as render writes them, unfolded and encoded, when every one is single-spaced:
    printable ASCII, not empty, no run of spaces, no space at either end (then each is its own relaxed
    form, RFC 6376 3.4.2). None otherwise (a value holding a tab, a line break or another byte, an
    address with non-ASCII): the signer reads the block itself. The values are checked joined by line
    feeds, by one translation (SPACING) and two searches, not one by one."""
    joined = "\n".join(values)
    if "\r" in joined:
        joined = joined.replace("\r\n ", " ")  # the folds (List-Unsubscribe's, email.header's)
    data = joined.encode("utf-8")
    spacing = data.translate(SPACING)
    if b"!" in spacing or RUN_OF_SPACES.search(spacing) or spacing.startswith(b" ") or spacing.endswith(b" "):
        return None
    return data.split(b"\n")


def _unsubscribe_mailto(tokens: MailTokens, deliverable_id: int, bounce_domain: str) -> str:
    """The mailto entry of List-Unsubscribe, only with a bounce domain: an address that nothing reads
    would be an unsubscribe promise broken, so without one only the https link is offered."""
    if not bounce_domain:
        return ""
    token = tokens.unsubscribe_address_token(deliverable_id)
    return f",{CRLF} <mailto:{UNSUBSCRIBE_PREFIX}{token}@{bounce_domain}>"


def multipart_alternative(headers: list[str], text_body: str, html_body: str) -> bytes:
    """A multipart/alternative message (text, then html), both parts UTF-8: the text in quoted-printable
    when it is mostly ASCII (_text_part), the html in base64.

    A WireMessage (ready for SMTP's DATA as it is) when the headers hold no line break but CRLF
    folding and start no line with "."; the parts are encoded so, and the boundaries are ours (starting
    with "=_", which quoted-printable never writes)."""
    return _alternative_message(headers, *_text_part(text_body), html_body)


def _alternative_message(headers: list[str], text_encoding: bytes, text_part: bytes, html_body: str) -> bytes:
    """multipart_alternative's message, its text part already encoded."""
    # The headers joined and checked as one string, not one by one (a dozen calls an email).
    head = CRLF.join(headers)
    boundary = _boundary()
    message = _multipart(
        head.encode("utf-8"), _content_type(boundary), boundary, text_encoding, text_part, html_body
    )
    return WireMessage(message) if _wire_safe(head) else message


def _boundary() -> bytes:
    # "=_" keeps the boundary out of either part; the rest only tells it from others' boundaries, so it
    # needs no secret randomness (os.urandom was a system call an email, 1 to 6 us).
    return b"=_%024x" % random.getrandbits(96)


CONTENT_TYPE_PREFIX = b"Content-Type: "


def _content_type(boundary: bytes) -> bytes:
    return b'multipart/alternative; boundary="' + boundary + b'"'


def _multipart(
    head: bytes, content_type: bytes, boundary: bytes, text_encoding: bytes, text_part: bytes, html_body: str
) -> bytes:
    """The message: the header lines `head`, Content-Type, and the text and html parts."""
    return CRLF_BYTES.join(
        [
            head,
            CONTENT_TYPE_PREFIX + content_type,
            b"",
            b"--" + boundary,
            b'Content-Type: text/plain; charset="utf-8"',
            b"Content-Transfer-Encoding: " + text_encoding,
            b"",
            text_part,
            b"--" + boundary,
            b'Content-Type: text/html; charset="utf-8"',
            b"Content-Transfer-Encoding: base64",
            b"",
            _base64(html_body),
            b"--" + boundary + b"--",
            b"",
        ]
    )


def _wire_safe(head: str) -> bool:
    """Whether header lines (joined by CRLF) hold no line break but CRLF and start no line with "."."""
    unfolded = head.replace(CRLF, "")
    return not ("\r" in unfolded or "\n" in unfolded or head.startswith(".") or "\n." in head)


def _text_part(text: str) -> tuple[bytes, bytes]:
    """The plain-text part's encoding and content. Mostly ASCII (UTF-8 adds under an eighth to its
    size): quoted-printable, readable as it is, which spam filters expect of plain text (rspamd scores
    base64 text); otherwise base64, shorter for other scripts."""
    data = text.encode("utf-8")
    if (len(data) - len(text)) * 8 > len(data):
        return b"base64", _base64_bytes(data)
    return b"quoted-printable", _leading_dots_escaped(_quoted_printable(data))


def _text_part_not_known_spaced(text: str) -> tuple[bytes, bytes, bool]:
    """_text_part's encoding and content, and whether they are known to be single-spaced: base64 is
    (it has no space at all); quoted-printable is not searched here (the signer does it, if it signs)."""
    encoding, content = _text_part(text)
    return encoding, content, encoding == b"base64"


def _single_spaced(encoded: bytes) -> bool:
    """Whether `encoded` holds no tab, no run of spaces and no space before a CR or at its end: what
    DKIM's relaxed body canonicalisation (RFC 6376 3.4.4) leaves as it is."""
    return not (b"\t" in encoded or b"  " in encoded or b" \r" in encoded or encoded.endswith(b" "))


def _quoted_printable(data: bytes) -> bytes:
    """binascii.b2a_qp's text encoding with CRLF line endings (a leading "." left as it is)."""
    marked = data.translate(QP_MARKS)
    if b"\x01" in marked or b"\x00\n" in marked or marked.endswith(b"\x00"):
        encoded = binascii.b2a_qp(data, istext=True)
        return (
            LINE_ENDINGS.sub(CRLF_BYTES, encoded) if b"\r" in encoded else encoded.replace(b"\n", CRLF_BYTES)
        )
    return CRLF_BYTES.join(
        [line if len(line) <= QP_LINE else _soft_breaks(line) for line in data.split(b"\n")]
    )


def _leading_dots_escaped(encoded: bytes) -> bytes:
    """No line starting with "." (the content is not dot-stuffed: WireMessage)."""
    if encoded.startswith(b"."):
        encoded = b"=2E" + encoded[1:]
    return DOT_AFTER_LINE_BREAK.sub(b"\n=2E", encoded)


def _soft_broken_start(start: str) -> tuple[bytes, str]:
    """The start of a line before its first hole cut in two: the soft-broken lines that whatever
    follows leaves as they are, encoded (each ending with its soft break), and the rest. Those are
    the 75-character pieces up to its first byte written as a code, less the last two characters:
    binascii puts a soft break before a line's 76th character, of plain ASCII, when another follows."""
    data = start.encode("utf-8")
    code = data.translate(QP_MARKS).find(b"\x01")
    plain = len(data) if code < 0 else code + 1
    cut = max(0, (min(plain, len(data)) - 2) // (QP_LINE - 1)) * (QP_LINE - 1)
    return b"".join(data[at : at + QP_LINE - 1] + b"=\r\n" for at in range(0, cut, QP_LINE - 1)), start[cut:]


def _soft_breaks(line: bytes) -> bytes:
    """A long line of plain printable ASCII cut as binascii.b2a_qp cuts it: a soft break ("=" and a line
    ending) before each 75th character that has at least two more after it. binascii's encoder (C)
    looks at every byte twice, and takes three times base64's time (about 20 us a 3 KB text part,
    most of it lines it leaves as they are): the text part is written by binascii only when it holds
    a byte quoted-printable writes as a code, or whitespace ending a line (which it encodes);
    otherwise its lines are kept and the long ones cut here, the same bytes
    (tests/mail/sending/test_quoted_printable.py)."""
    breaks = (len(line) - 2) // (QP_LINE - 1)
    if breaks > len(QP_CHUNKS):
        return binascii.b2a_qp(line, istext=True).replace(b"\n", CRLF_BYTES)
    chunks = list(map(line.__getitem__, QP_CHUNKS[:breaks]))
    chunks.append(line[breaks * (QP_LINE - 1) :])
    return b"=\r\n".join(chunks)


def _base64(text: str) -> bytes:
    return _base64_bytes(text.encode("utf-8"))


def _base64_bytes(data: bytes) -> bytes:
    """Lines of 76 characters joined by CRLF, as `base64.encodebytes` cuts them. pybase64 encodes and
    cuts in one C call (SIMD where the processor has it): the html part of a 9 KB email took 19 us with
    binascii and a slice a line, 3 with pybase64 (tests/mail/sending/test_render.py holds it to the
    standard library's bytes)."""
    return pybase64.encodebytes(data).replace(b"\n", CRLF_BYTES)[:-2]


@lru_cache(maxsize=16)
def _host_of(base_url: str) -> str:
    return urlsplit(base_url).hostname or "localhost"


_date_cache: tuple[int, str] = (0, "")


def _date_header() -> str:
    """The Date header, formatted once a second rather than once an email."""
    global _date_cache
    second = int(time.time())
    if _date_cache[0] != second:
        _date_cache = (second, formatdate(second, usegmt=True))
    return _date_cache[1]


def _values(recipient: Recipient) -> dict[str, str]:
    values = dict(recipient.fields)
    values["first_name"] = recipient.first_name or ""
    values["last_name"] = recipient.last_name or ""
    values["email"] = recipient.email
    return values


def _join_url(pieces: list[Piece], values: Mapping[str, str]) -> str:
    return "".join(
        piece if isinstance(piece, str) else quote(values.get(piece.name) or piece.fallback, safe="")
        for piece in pieces
        if isinstance(piece, str | Tag)
    )


def _brace_references_kept(source: str) -> str:
    """The html with each brace written as a character reference replaced by its stand-in, which no
    decoding turns into a brace (see BRACE_REFERENCE)."""
    if "&" not in source:
        return source
    return BRACE_REFERENCE.sub(lambda match: BRACE_STAND_INS[html.unescape(match.group(0))], source)


def _braces_back(literal: str) -> str:
    if "\x00" not in literal:
        return literal
    for brace, stand_in in BRACE_STAND_INS.items():
        literal = literal.replace(stand_in, brace)
    return literal


def _pieces(source: str) -> list[Piece]:
    """Cut a template into literal strings, merge tags and the compiler's markers."""
    pieces: list[Piece] = []
    for literal_or_marker, index in _split_markers(source):
        if index is not None:
            pieces.append(index)
            continue
        position = 0
        for match in MERGE_TAG.finditer(literal_or_marker):
            if match.start() > position:
                pieces.append(_braces_back(literal_or_marker[position : match.start()]))
            fallback = (match.group(2) or "").strip()
            if len(fallback) >= 2 and fallback[0] == fallback[-1] and fallback[0] in "\"'":
                fallback = fallback[1:-1]
            pieces.append(Tag(match.group(1).strip().lower(), _braces_back(fallback)))
            position = match.end()
        if position < len(literal_or_marker):
            pieces.append(_braces_back(literal_or_marker[position:]))
    return pieces


def _split_markers(source: str) -> list[tuple[str, Piece | None]]:
    out: list[tuple[str, Piece | None]] = []
    position = 0
    for match in MARKER.finditer(source):
        out.append((source[position : match.start()], None))
        code = match.group(1)
        marker: Piece
        if code == "P":
            marker = Slot("pixel")
        elif code == "U":
            marker = Slot("unsubscribe")
        elif code == "W":
            marker = Slot("web_version")
        else:
            marker = Link(int(code[1:]))
        out.append(("", marker))
        position = match.end()
    out.append((source[position:], None))
    return out


def _before_body_end(body: str, addition: str) -> str:
    matches = list(BODY_END.finditer(body))
    if not matches:
        return body + addition
    at = matches[-1].start()
    return body[:at] + addition + body[at:]


def _after_body_start(body: str, addition: str) -> str:
    match = BODY_START.search(body)
    if match is None:
        return addition + body
    return body[: match.end()] + addition + body[match.end() :]


def _ascii_domain(address: str) -> str:
    """user@exämple.com -> user@xn--exmple-cua.com: only the local part may then need SMTPUTF8."""
    local, _, domain = address.rpartition("@")
    if not local or domain.isascii():
        return address
    try:
        return f"{local}@{domain.encode('idna').decode('ascii')}"
    except UnicodeError:
        return address


def _header_text(value: str) -> str:
    value = " ".join(value.split())  # no CR or LF may reach a header
    if value.isascii():
        return value
    return Header(value, "utf-8").encode(linesep=CRLF)


def _address_header(name: str, address: str) -> str:
    name = " ".join(name.split())
    if not name:
        return f"<{address}>"
    if name.isascii():
        escaped = name.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}" <{address}>'
    return f"{Header(name, 'utf-8').encode(linesep=CRLF)} <{address}>"


class _TextMaker(HTMLParser):
    """html -> readable plain text: blocks on their own lines, links as `label (url)`, no scripts."""

    BLOCKS = frozenset(
        [
            "p",
            "div",
            "br",
            "tr",
            "li",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "table",
            "ul",
            "ol",
            "blockquote",
            "section",
            "article",
            "header",
            "footer",
            "hr",
        ]
    )
    SKIP = frozenset({"script", "style", "head", "title"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skipping = 0
        self.hrefs: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIP:
            self.skipping += 1
        elif tag in self.BLOCKS:
            self.out.append("\n")
        if tag == "li":
            self.out.append("- ")
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href"))
        elif tag == "img" and not self.skipping:
            alt = (dict(attrs).get("alt") or "").strip()
            if alt:  # what the image says, for readers of the text part (and spam filters)
                self.out.append(f" {WHITESPACE.sub(' ', alt)} ")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self.BLOCKS:
            self.out.append("\n")
        if tag == "a" and self.hrefs:
            href = self.hrefs.pop()
            if href and not href.startswith("#"):
                self.out.append(f" ({href})")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.out.append(WHITESPACE.sub(" ", data))


def html_to_text(source: str) -> str:
    maker = _TextMaker()
    maker.feed(source)
    maker.close()
    lines = [" ".join(line.split()) for line in "".join(maker.out).splitlines()]
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()
