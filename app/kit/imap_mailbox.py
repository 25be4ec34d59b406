"""An IMAP mailbox named by a URL (the bounce mailbox, TIDINGS_BOUNCE_IMAP_URL): its parts, read once,
and a logged-in connection with the mailbox selected.

`imaps://user:password@host:993/INBOX` (implicit TLS), or `imap://...:143/INBOX` (plain, with
`?starttls=1` to upgrade; `?verify=0` skips certificate checks for a self-signed test server). The user
name and password are percent-decoded; the mailbox defaults to INBOX. Below the settings, which check
the URL with it.
"""

from __future__ import annotations

import imaplib
import ssl
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from app.kit.flags import TRUE_WORDS

IMAP_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class ImapMailbox:
    host: str
    port: int
    implicit_tls: bool
    starttls: bool
    verify_tls: bool
    username: str
    password: str
    mailbox: str

    @classmethod
    def from_url(cls, url: str) -> ImapMailbox:
        parts = urlsplit(url)
        if parts.scheme not in ("imap", "imaps") or not parts.hostname or parts.username is None:
            raise ValueError("TIDINGS_BOUNCE_IMAP_URL must look like imaps://user:password@host:993/INBOX")
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        implicit_tls = parts.scheme == "imaps"
        return cls(
            host=parts.hostname,
            port=parts.port or (993 if implicit_tls else 143),
            implicit_tls=implicit_tls,
            starttls=query.get("starttls", "").lower() in TRUE_WORDS,
            verify_tls=query.get("verify", "1").lower() in TRUE_WORDS,
            username=unquote(parts.username),
            password=unquote(parts.password or ""),
            mailbox=unquote(parts.path.lstrip("/")) or "INBOX",
        )

    def describe(self) -> str:
        """Where, for the log (never the password)."""
        return f"{self.username}@{self.host}:{self.port}/{self.mailbox}"

    def connect(self) -> imaplib.IMAP4:
        context = ssl.create_default_context()
        if not self.verify_tls:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        client: imaplib.IMAP4
        if self.implicit_tls:
            client = imaplib.IMAP4_SSL(
                self.host, self.port, ssl_context=context, timeout=IMAP_TIMEOUT_SECONDS
            )
        else:
            client = imaplib.IMAP4(self.host, self.port, timeout=IMAP_TIMEOUT_SECONDS)
            if self.starttls:
                client.starttls(ssl_context=context)
        try:
            client.login(self.username, self.password)
            status, _ = client.select(_quoted(self.mailbox))
            if status != "OK":
                raise imaplib.IMAP4.error(f"cannot select the mailbox {self.mailbox!r}")
        except BaseException:
            client.shutdown()
            raise
        return client


def _quoted(mailbox: str) -> str:
    return '"' + mailbox.replace("\\", "\\\\").replace('"', '\\"') + '"'
