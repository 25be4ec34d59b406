"""Signed tokens in the links of sent emails: open pixel, click redirect, unsubscribe, form confirmation.

Each kind has its own salt, so a token of one kind is never accepted as another. A click token carries
the exact URL it redirects to: the redirect goes nowhere that was not signed (no open redirect).
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import json
import re
import threading
import zlib
from dataclasses import dataclass
from datetime import datetime
from functools import cache, lru_cache

from cryptography.hazmat.primitives.ciphers import Cipher, CipherContext, algorithms, modes
from itsdangerous import BadData, URLSafeSerializer, URLSafeTimedSerializer

# A confirmation link of a hosted form is good for a week, as most double opt-in services allow.
CONFIRM_MAX_AGE_SECONDS = 7 * 24 * 3600
# Payloads longer than this (a long tracked URL) are zlib-compressed when that makes them shorter, as
# itsdangerous does for all; below it compression never pays and costs more than the signature.
COMPRESS_ABOVE = 200
URLSAFE = bytes.maketrans(b"+/", b"-_")
SHA1_BLOCK = 64
# The VERP token: the deliverable id in decimal, "-", then this many hex digits of an HMAC-SHA256 (48
# bits: guessing one for a chosen deliverable takes 2**47 tries, each a DSN). Digits and lowercase
# letters only, since some MTAs lowercase the local part of an address.
VERP_MAC_DIGITS = 12
VERP_TOKEN = re.compile(rf"([1-9][0-9]{{0,9}})-([0-9a-f]{{{VERP_MAC_DIGITS}}})")
MAX_ROW_ID = 2**31 - 1
# Prefixed to the id before the MAC of the unsubscribe address (ids are digits: no VERP message starts so).
UNSUBSCRIBE_PURPOSE = b"unsubscribe:"
# The Message-ID's left part: this mark and the deliverable id, one AES block under a key of the secret
# key's, in hex. The bounce mailbox and the webhooks read the email a report is about from it; nobody
# else learns the row id, which would tell how many emails the server has sent. The mark is checked on
# reading (a made-up token passes with odds of 2**-64).
MESSAGE_ID_MARK = b"tidings\0"
MESSAGE_ID_TOKEN = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True, slots=True)
class Signup:
    form_id: int
    email: str
    first_name: str | None
    last_name: str | None


class _Minter:
    """Makes the tokens `URLSafeSerializer.dumps` makes, at a tenth of the cost: several go into every
    email. The key is derived once (itsdangerous derives it and builds an HMAC object on every call),
    the HMAC is OpenSSL's one-shot, and no zlib compression is tried (it never pays for a row id and
    a URL; `loads` reads uncompressed payloads as they are). Checked against `loads` when made."""

    def __init__(self, serializer: URLSafeSerializer) -> None:
        signer = serializer.make_signer()
        self._sep = signer.sep
        # HMAC-SHA1 (RFC 2104) from the two padded-key states, copied per token: OpenSSL 3 looks the
        # digest up again on every `hmac.digest` call, which costs more than the hashing.
        key = signer.derive_key()
        key = (hashlib.sha1(key).digest() if len(key) > SHA1_BLOCK else key).ljust(SHA1_BLOCK, b"\0")
        self._inner = hashlib.sha1(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha1(bytes(b ^ 0x5C for b in key))
        if serializer.loads(self.sign(b'[1,"https://example.com/"]')) != [1, "https://example.com/"]:
            raise RuntimeError("itsdangerous changed how it signs: MailTokens must follow")

    def sign(self, json_payload: bytes) -> str:
        payload = _urlsafe_b64(json_payload)
        if len(json_payload) > COMPRESS_ABOVE:
            compressed = zlib.compress(json_payload)
            if len(compressed) < len(json_payload) - 1:
                payload = b"." + _urlsafe_b64(compressed)
        # itsdangerous' default: HMAC-SHA1 under the django-concat derived key (checked in __init__).
        inner = self._inner.copy()
        inner.update(payload)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return (payload + self._sep + _urlsafe_b64(outer.digest())).decode("ascii")


def _urlsafe_b64(data: bytes) -> bytes:
    return binascii.b2a_base64(data, newline=False).translate(URLSAFE).rstrip(b"=")


@lru_cache(maxsize=4096)
def _json_string(value: str) -> bytes:
    # The links of a campaign repeat for every recipient: each URL is JSON-encoded once.
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


class MailTokens:
    def __init__(self, secret_key: str) -> None:
        self._open = URLSafeSerializer(secret_key, salt="tidings.open")
        self._click = URLSafeSerializer(secret_key, salt="tidings.click")
        self._unsubscribe = URLSafeSerializer(secret_key, salt="tidings.unsubscribe")
        self._confirm = URLSafeTimedSerializer(secret_key, salt="tidings.form-confirm")
        self._open_minter = _Minter(self._open)
        self._click_minter = _Minter(self._click)
        self._unsubscribe_minter = _Minter(self._unsubscribe)
        self._web_version = URLSafeSerializer(secret_key, salt="tidings.web-version")
        self._web_version_minter = _Minter(self._web_version)
        # HMAC-SHA256 from its two padded-key states, copied per token (as _Minter does for SHA-1): the
        # hmac module's own copy costs five times more, once an email.
        verp_key = hashlib.sha256(b"tidings.verp\0" + secret_key.encode("utf-8")).digest().ljust(64, b"\0")
        self._verp_inner = hashlib.sha256(bytes(b ^ 0x36 for b in verp_key))
        self._verp_outer = hashlib.sha256(bytes(b ^ 0x5C for b in verp_key))
        message_id_key = hashlib.sha256(b"tidings.message-id\0" + secret_key.encode("utf-8")).digest()
        # One block a token, no chaining: ECB is the block cipher itself, a keyed permutation of the id.
        self._message_id_cipher = Cipher(algorithms.AES(message_id_key[:16]), modes.ECB())
        # An encryptor per thread, made once (making one costs ten times the encryption).
        self._encryptors = threading.local()

    def message_id_token(self, deliverable_id: int) -> str:
        """The left part of the Message-ID of the deliverable's email (32 hex digits)."""
        encryptor: CipherContext | None = getattr(self._encryptors, "context", None)
        if encryptor is None:
            encryptor = self._encryptors.context = self._message_id_cipher.encryptor()
        return encryptor.update(MESSAGE_ID_MARK + deliverable_id.to_bytes(8, "big")).hex()

    def read_message_id_token(self, token: str) -> int | None:
        """The deliverable id of a Message-ID token we made, else None."""
        token = token.lower()
        if MESSAGE_ID_TOKEN.fullmatch(token) is None:
            return None
        decryptor = self._message_id_cipher.decryptor()
        block = decryptor.update(bytes.fromhex(token)) + decryptor.finalize()
        deliverable_id = int.from_bytes(block[8:], "big")
        if block[:8] != MESSAGE_ID_MARK or not 0 < deliverable_id <= MAX_ROW_ID:
            return None
        return deliverable_id

    def verp_token(self, deliverable_id: int) -> str:
        """What goes after `bounces+` in the envelope sender of the deliverable's email."""
        return f"{deliverable_id}-{self._verp_mac(deliverable_id)}"

    def read_verp(self, token: str) -> int | None:
        """The deliverable id of a VERP token we made (in any letter case), else None."""
        return self._read_address_token(token, b"")

    def unsubscribe_address_token(self, deliverable_id: int) -> str:
        """What goes after `unsubscribe+` in the List-Unsubscribe mailto address of the deliverable's
        email: signed apart from the VERP token, so one is never taken for the other."""
        return f"{deliverable_id}-{self._verp_mac(deliverable_id, UNSUBSCRIBE_PURPOSE)}"

    def read_unsubscribe_address(self, token: str) -> int | None:
        return self._read_address_token(token, UNSUBSCRIBE_PURPOSE)

    def _read_address_token(self, token: str, purpose: bytes) -> int | None:
        match = VERP_TOKEN.fullmatch(token.strip().lower())
        if match is None:
            return None
        deliverable_id = int(match.group(1))
        if deliverable_id > MAX_ROW_ID:
            return None
        if not hmac.compare_digest(match.group(2), self._verp_mac(deliverable_id, purpose)):
            return None
        return deliverable_id

    def _verp_mac(self, deliverable_id: int, purpose: bytes = b"") -> str:
        inner = self._verp_inner.copy()
        inner.update(purpose + b"%d" % deliverable_id)
        outer = self._verp_outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()[:VERP_MAC_DIGITS]

    def open_token(self, deliverable_id: int) -> str:
        return self._open_minter.sign(b"%d" % deliverable_id)

    def read_open(self, token: str) -> int | None:
        return _int_or_none(_loads(self._open, token))

    def click_token(self, deliverable_id: int, url: str) -> str:
        return self._click_minter.sign(b"[%d,%s]" % (deliverable_id, _json_string(url)))

    def read_click(self, token: str) -> tuple[int, str] | None:
        value = _loads(self._click, token)
        if (
            isinstance(value, list)
            and len(value) == 2
            and _int_or_none(value[0]) is not None
            and isinstance(value[1], str)
        ):
            return value[0], value[1]
        return None

    def unsubscribe_token(self, deliverable_id: int) -> str:
        return self._unsubscribe_minter.sign(b"%d" % deliverable_id)

    def read_unsubscribe(self, token: str) -> int | None:
        return _int_or_none(_loads(self._unsubscribe, token))

    def web_version_token(self, deliverable_id: int, campaign_id: int) -> str:
        """The "view in browser" link's token: the email it shows, as its reader got it. The campaign
        is named too, so that a preview's or test email's link (which names no email) shows it."""
        return self._web_version_minter.sign(b"[%d,%d]" % (deliverable_id, campaign_id))

    def read_web_version(self, token: str) -> tuple[int, int] | None:
        value = _loads(self._web_version, token)
        if isinstance(value, list) and len(value) == 2:
            deliverable_id, campaign_id = _int_or_none(value[0]), _int_or_none(value[1])
            if deliverable_id is not None and campaign_id is not None:
                return deliverable_id, campaign_id
        return None

    def confirm_token(self, signup: Signup) -> str:
        return self._confirm.dumps([signup.form_id, signup.email, signup.first_name, signup.last_name])

    def read_confirm_issued(self, token: str) -> tuple[Signup, datetime] | None:
        """The sign-up and when its token was made (whole seconds, UTC): a confirmation must not undo
        an unsubscribe that came after the link was sent."""
        try:
            value, issued_at = self._confirm.loads(
                token, max_age=CONFIRM_MAX_AGE_SECONDS, return_timestamp=True
            )
        except BadData:
            return None
        if not (isinstance(value, list) and len(value) == 4 and _int_or_none(value[0]) is not None):
            return None
        form_id, email, first_name, last_name = value
        names_ok = all(name is None or isinstance(name, str) for name in (first_name, last_name))
        if not isinstance(email, str) or not names_ok:
            return None
        return Signup(form_id, email, first_name, last_name), issued_at


@cache
def mail_tokens(secret_key: str) -> MailTokens:
    """The process's MailTokens of a key: making one derives its keys and checks itsdangerous."""
    return MailTokens(secret_key)


def _loads(serializer: URLSafeSerializer, token: str) -> object:
    try:
        return serializer.loads(token)
    except BadData:
        return None


def _int_or_none(value: object) -> int | None:
    # bool is an int in Python; a signed `true` is not a row id.
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
