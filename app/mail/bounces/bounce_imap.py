"""The worker's bounce mailbox poll (TIDINGS_BOUNCE_IMAP_URL), registered by app/scheduler.py.

Every TIDINGS_BOUNCE_IMAP_INTERVAL seconds the job logs in to the mailbox, reads up to POLL_BATCH unseen
messages, and hands each to `bounce_mailbox.ingest_message` in its own transaction. A bounce or a
complaint report (applied, or naming no email of ours) is then flagged \\Seen and \\Deleted and
expunged; any other message (a human's reply, or one that cannot be read: nested too deep, say) is
only flagged \\Seen and left for a person to read, and the poll goes on to the next. When the database
fails, the message keeps its flags and the next poll reads it again. A round that filled its batch runs
again at once.

The URL: `imaps://user:password@host:993/INBOX` (implicit TLS), or `imap://...:143/INBOX` (plain, with
`?starttls=1` to upgrade; `?verify=0` skips certificate checks for a self-signed test server). The
user name and password are percent-decoded; the mailbox defaults to INBOX. imaplib is blocking, so a
round runs in a thread.
"""

from __future__ import annotations

import asyncio
import imaplib
import logging
import re

from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import transaction
from app.kit.imap_mailbox import ImapMailbox
from app.kit.jobs import Job, JobSet
from app.kit.time import utcnow
from app.mail.bounces.bounce_mailbox import MAX_MESSAGE_BYTES, ingest_message
from app.mail.sending.queue import BounceRule
from app.mail.sending.tokens import MailTokens

log = logging.getLogger("tidings.bounces")

POLL_BATCH = 100
UID_IN_FETCH = re.compile(rb"\bUID (\d+)")


class BounceMailboxJobs(JobSet):
    def __init__(self, settings: Settings, session_factory: sessionmaker[Session]) -> None:
        self.mailbox = ImapMailbox.from_url(settings.bounce_imap_url)
        self.interval = settings.bounce_imap_interval
        self.session_factory = session_factory
        self.tokens = MailTokens(settings.resolved_secret_key)
        self.rule = BounceRule.from_settings(settings)

    def jobs(self) -> list[Job]:
        return [Job("bounce mailbox poll", self.interval, self.poll)]

    async def poll(self) -> int:
        try:
            return await asyncio.to_thread(self.poll_once)
        except (OSError, imaplib.IMAP4.error) as exc:
            # The mailbox's trouble (down, a refused login): one line, not a traceback, every round.
            log.warning(
                "bounce mailbox poll of %s failed; retrying in %.1f s: %s",
                self.mailbox.describe(),
                self.interval,
                exc,
            )
            return 0

    def poll_once(self) -> int:
        """One round: the number of messages read, POLL_BATCH when more may be waiting."""
        client = self.mailbox.connect()
        try:
            status, data = client.uid("SEARCH", "UNSEEN")
            if status != "OK":
                raise imaplib.IMAP4.error(f"SEARCH UNSEEN failed: {data!r}")
            uids = [uid.decode("ascii") for uid in (data[0] or b"").split()][:POLL_BATCH]
            deleted = 0
            for uid in uids:
                raw = self._fetch(client, uid)
                if raw is None:
                    continue
                with transaction(self.session_factory) as session:
                    ingested = ingest_message(session, raw, self.tokens, utcnow(), self.rule)
                log.info("bounce mailbox message %s: %s", uid, ingested.describe())
                # Read and acted on (a bounce of any class, a complaint, an unsubscribe request): deleted.
                # Not a bounce, or unreadable: only flagged, left for a person.
                done = ingested.kind not in ("none", "unreadable")
                flags = r"(\Seen \Deleted)" if done else r"(\Seen)"
                client.uid("STORE", uid, "+FLAGS.SILENT", flags)
                deleted += done
            if deleted:
                client.expunge()
            return len(uids)
        finally:
            try:
                client.logout()
            except (OSError, imaplib.IMAP4.error):
                client.shutdown()

    @staticmethod
    def _fetch(client: imaplib.IMAP4, uid: str) -> bytes | None:
        # PEEK: the message stays unseen until it is applied; a partial fetch bounds what is read.
        status, data = client.uid("FETCH", uid, f"(BODY.PEEK[]<0.{MAX_MESSAGE_BYTES}>)")
        if status != "OK":
            return None
        for item in data:
            if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], bytes):
                return item[1]
        return None  # expunged by someone else meanwhile
