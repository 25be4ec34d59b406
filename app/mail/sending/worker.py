"""A send worker: fan out due campaigns, claim a batch, render and send it outside any transaction,
record the results. Several run at once (lanes in one process, and any number of `tidings worker`
processes); the queue's row locks keep them from sending anything twice."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TypeVar

import psycopg
from prometheus_client import Counter
from sqlalchemy import Connection, select
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import transaction
from app.kit.time import utcnow
from app.mail.campaigns.campaign_check import SigningPolicy, from_domain, note_send_warning, unsigned_sentence
from app.mail.campaigns.campaign_control_service import cancel_returned
from app.mail.sending.dkim import DkimSigner
from app.mail.sending.holds import HeldCampaigns, held_campaign_ids, held_campaign_ids_on
from app.mail.sending.progress import CampaignProgress
from app.mail.sending.queue import (
    BounceRule,
    Claimed,
    Limits,
    Outcome,
    SendResult,
    claim_batch,
    custom_fields_of,
    fan_out_due,
    first_lists,
    record_outcomes,
    record_sent,
    release_expired_leases,
    release_unsent,
)
from app.mail.sending.recorder import OutcomeRecorder, Place
from app.mail.sending.render import CompiledCampaign, Recipient, campaign_headers, compile_stored, render
from app.mail.sending.tokens import MailTokens
from app.mail.sending.transport import Deferred, PermanentFailure, TemporaryFailure, Transport
from app.mail.stats import SendingTotals, sending_totals
from app.models import Campaign

T = TypeVar("T")
log = logging.getLogger("tidings.sending")
EMAILS = Counter(
    "tidings_emails_total", "Emails this process's send workers attempted, by result", ["result"]
)

# At most this long before its lease ends, a claimed email is no longer started (a tenth of shorter leases).
MAX_LEASE_MARGIN = timedelta(seconds=5)


@dataclass(frozen=True, slots=True)
class SendConfig:
    base_url: str
    batch_size: int
    limits: Limits
    bounce_rule: BounceRule
    # Emails of a batch in flight at once (the SMTP pool's size: more would only wait for a connection).
    concurrency: int = 8
    # TIDINGS_BOUNCE_DOMAIN: VERP envelope senders at this domain; empty: the campaign's from address.
    bounce_domain: str = ""
    # Email of a From domain without a DKIM key: sent with a warning, or refused (campaign_check.py).
    signing: SigningPolicy = field(default_factory=SigningPolicy)

    @classmethod
    def from_settings(cls, settings: Settings) -> SendConfig:
        return cls(
            base_url=settings.base_url.rstrip("/"),
            batch_size=settings.send_batch_size,
            limits=Limits(
                send_rate=settings.send_rate,
                daily_send_limit=settings.daily_send_limit,
                lease=timedelta(seconds=settings.send_lease_seconds),
            ),
            bounce_rule=BounceRule.from_settings(settings),
            concurrency=settings.send_concurrency,
            bounce_domain=settings.bounce_domain,
            signing=SigningPolicy.from_settings(settings),
        )

    @property
    def lease_margin(self) -> timedelta:
        """An email is not started this close to the end of its claim's lease (see SendWorker._send)."""
        return min(MAX_LEASE_MARGIN, self.limits.lease / 10)


class SendWorker:
    def __init__(
        self,
        config: SendConfig,
        session_factory: sessionmaker[Session],
        transport: Transport,
        tokens: MailTokens,
        clock: Callable[[], datetime] = utcnow,
        dkim: DkimSigner | None = None,
    ) -> None:
        self.config = config
        self.session_factory = session_factory
        self.transport = transport
        self.tokens = tokens
        self.clock = clock
        # Signs each email whose From domain has a key (None: nothing is signed, no key is looked up).
        self.dkim = dkim
        self._lease_margin = config.lease_margin
        # Compiled campaigns by id, with the updated_at they were compiled from (automation emails
        # can still be edited while they are being sent).
        self._compiled: dict[int, tuple[tuple[datetime, bool], CompiledCampaign]] = {}
        # The campaigns this worker fanned out, followed in its log until they finish.
        self.progress = CampaignProgress()
        # Outcomes go to the database in small groups as the relay answers (see recorder.py).
        self.recorder = OutcomeRecorder(self.record)
        # Set by a graceful stop: no email is started after it; claimed ones go back to the queue.
        self.stopping = False
        # Sent groups are recorded on this connection, in autocommit (see record).
        self._recording: Connection | None = None
        # (domain, campaign) pairs already warned about as unsigned, and the campaigns whose email is
        # refused for want of a key (production): see _check_signing.
        self._unsigned_noted: set[tuple[str, int]] = set()
        self._refused_unsigned: dict[int, str] = {}
        # Campaigns paused or cancelled by their sender: their claimed emails go back to the queue.
        self.holds = HeldCampaigns(self.held)
        # The holds are read while the recorder writes, both in worker threads: they take turns, so that
        # a session factory bound to one connection (the tests') is never used by two threads at once.
        self._turns = threading.Lock()

    # --- the steps, each one transaction ---

    def fan_out(self) -> list[int]:
        with transaction(self.session_factory) as session:
            queued = fan_out_due(session, self.clock())
        if queued:
            self.progress.started(queued, self.clock())
        return list(queued)

    def standings(self, campaign_ids: list[int]) -> dict[int, SendingTotals]:
        with transaction(self.session_factory, write=False) as session:
            return sending_totals(session, campaign_ids)

    def release_leases(self) -> int:
        with transaction(self.session_factory) as session:
            return release_expired_leases(session, self.clock())

    def claim(self) -> list[Claimed]:
        with transaction(self.session_factory) as session:
            claimed = claim_batch(
                session, self.clock(), self.config.batch_size, self.config.limits, load_fields=False
            )
            if not claimed:
                return claimed
            self._load_campaigns(session, claimed)
            if self.dkim is not None:
                self.dkim.refresh(session)  # keys made or deleted since the last batch
                self._check_signing(session, {c.campaign_id for c in claimed}, self.dkim)
            # Custom field values only for campaigns whose template names one (most name none).
            wanted = {c.contact_id for c in claimed if self._compiled[c.campaign_id][1].uses_custom_fields}
            if not wanted:
                return claimed
            fields = custom_fields_of(session, wanted)
            return [replace(c, fields=fields.get(c.contact_id, {})) for c in claimed]

    def record(self, outcomes: Sequence[Outcome]) -> None:
        """Write a group of outcomes (in the recorder's thread). A group of sent emails alone, nearly
        every group, is one UPDATE on PostgreSQL, run in autocommit on a connection kept for it: a
        transaction each group cost more CPU than the UPDATE (session, the pool's ping, BEGIN, COMMIT:
        1,670 against 480 us a group of 16, measured side by side); the rest goes through
        record_outcomes in a transaction."""
        with self._turns:
            self._record(outcomes)
            # The held campaigns on this round trip, when the senders would soon read them on one of
            # their own (a thread hop and a query ten times a second while sending).
            self.holds.read_along(self._read_held)

    def _record(self, outcomes: Sequence[Outcome]) -> None:
        if all(o.result == SendResult.SENT for o in outcomes):
            connection = self._recording_connection()
            if connection is not None:
                self._in_autocommit(connection, lambda on: record_sent(on, outcomes, self.clock()))
                return
        with transaction(self.session_factory) as session:
            record_outcomes(session, outcomes, self.clock(), self.config.bounce_rule)

    def _in_autocommit(self, connection: Connection, run: Callable[[Connection], T]) -> T:
        """`run` on the recording connection; a connection the database dropped since its last use (a
        restart, a failover) is replaced and `run` tried once more on a fresh one, which the pool pings
        first. What runs here is harmless to run twice: the sent UPDATE only changes rows still held
        under the claim's lease, and the holds are a read."""
        try:
            return run(connection)
        except psycopg.Error:
            lost = _lost(connection)
            self._drop_recording_connection(connection)
            if not lost:
                raise
            return run(self._recording_connection() or connection)
        except BaseException:
            self._drop_recording_connection(connection)
            raise

    def _recording_connection(self) -> Connection | None:
        """The connection sent groups are recorded on: PostgreSQL only (SQLite's writers take the
        database's one lock in a transaction of their own, see db.begin_write); a factory bound to a
        connection (the tests' outer transaction) lends that one."""
        if self._recording is None:
            bind = self.session_factory.kw["bind"]
            if bind.dialect.name != "postgresql":
                return None
            if isinstance(bind, Connection):
                return bind
            self._recording = bind.connect().execution_options(isolation_level="AUTOCOMMIT")
        return self._recording

    def _drop_recording_connection(self, connection: Connection) -> None:
        """Not reused after an error: the next group checks out a fresh one (a lost one is discarded
        rather than given back to the pool)."""
        if self._recording is connection:
            self._recording = None
            if _lost(connection):
                connection.invalidate()
            connection.close()

    def close(self) -> None:
        """Return the recording connection to the pool (the end of the process's jobs)."""
        if self._recording is not None:
            self._recording.close()
            self._recording = None

    def held(self) -> frozenset[int]:
        """The held campaigns (HeldCampaigns reads them every 0.1 s while sending, when the recorder's
        writes did not read them along: see record)."""
        with self._turns:
            return self._read_held()

    def _read_held(self) -> frozenset[int]:
        """On PostgreSQL one query on the recording connection, not a transaction of its own (a session,
        the pool's ping, BEGIN and COMMIT each time cost about 10 us of CPU an email at 700 emails a
        second)."""
        connection = self._recording_connection()
        if connection is not None:
            return self._in_autocommit(connection, held_campaign_ids_on)
        with transaction(self.session_factory, write=False) as session:
            return held_campaign_ids(session)

    def cancel_returned(self) -> int:
        with transaction(self.session_factory) as session:
            return cancel_returned(session, self.clock())

    def release(self, unsent: Sequence[Claimed]) -> int:
        with transaction(self.session_factory) as session:
            return release_unsent(session, unsent, self.clock())

    def _check_signing(self, session: Session, campaign_ids: set[int], dkim: DkimSigner) -> None:
        """Once a batch, per campaign in it (never per email): a From domain without a DKIM key is
        logged once per domain and campaign and noted on the campaign for its view; under the refusing
        policy its emails are failed instead of sent unsigned (_send)."""
        for campaign_id in campaign_ids:
            self._refused_unsigned.pop(campaign_id, None)
            domain = from_domain(self._compiled[campaign_id][1].from_email)
            if self.config.signing.relay_signs or dkim.keys_for(domain):
                continue
            refused = self.config.signing.refuse_unsigned
            sentence = unsigned_sentence(domain, refused=refused)
            if refused:
                self._refused_unsigned[campaign_id] = sentence
            if (domain, campaign_id) not in self._unsigned_noted:
                self._unsigned_noted.add((domain, campaign_id))
                log.warning("campaign %s: %s", campaign_id, sentence)
                note_send_warning(session, campaign_id, sentence)

    def _load_campaigns(self, session: Session, claimed: Sequence[Claimed]) -> None:
        """Compile the campaigns of a batch that this worker has not compiled from their current stamp,
        which the claim read along (Claimed.campaign_stamp): no query when none is stale. The account's
        open-pixel switch is part of the stamp: turning it off recompiles its campaigns."""
        stamps = {c.campaign_id: c.campaign_stamp for c in claimed}
        stale = [cid for cid, stamp in stamps.items() if self._compiled.get(cid, (None,))[0] != stamp]
        if not stale:
            return  # nearly every batch: its campaigns were compiled for an earlier one
        list_ids = first_lists(session, stale)
        for campaign in session.scalars(select(Campaign).where(Campaign.id.in_(stale))):
            headers = campaign_headers(
                campaign.id, campaign.account_id, list_ids.get(campaign.id), self.config.base_url
            )
            compiled = compile_stored(campaign, account_tracks_opens=stamps[campaign.id][1], headers=headers)
            self._compiled[campaign.id] = (stamps[campaign.id], compiled)

    # --- one round ---

    async def run_once(self) -> int:
        """Claim one batch, send it (its outcomes are recorded as they come), and return how many
        emails were claimed; 0 when nothing is due or the worker is stopping."""
        if self.stopping:
            return 0
        claimed = await asyncio.to_thread(self.claim)
        if not claimed:
            if self.progress.check_due(self.clock()):
                standings = await asyncio.to_thread(self.standings, self.progress.followed())
                self.progress.checked(standings, self.clock())
            return 0
        outcomes = await self._send_all(claimed)
        await self.recorder.flush()
        for outcome in outcomes:
            EMAILS.labels(outcome.result).inc()
        if self.progress:
            self.progress.recorded(outcomes, self.clock())
        if len(outcomes) < len(claimed):
            started = {outcome.deliverable_id for outcome in outcomes}
            unsent = [item for item in claimed if item.deliverable_id not in started]
            await asyncio.to_thread(self.release, unsent)
            lapsed = [item for item in unsent if item.campaign_id not in self.holds.last]
            if len(lapsed) < len(unsent):
                # Some were of a held campaign: those of a cancelled one are cancelled now, not at the
                # next lease sweep, so that its cancelled count is right as soon as its emails settle.
                await asyncio.to_thread(self.cancel_returned)
            if lapsed and not self.stopping:
                log.warning(
                    "%d of %d emails left unsent and put back in the queue: their lease was running out "
                    "(TIDINGS_SEND_LEASE_SECONDS too short for a batch?)",
                    len(lapsed),
                    len(claimed),
                )
        troubled = [o for o in outcomes if o.result not in (SendResult.SENT, SendResult.DEFERRED)]
        if troubled:
            # One line a batch, not one an email: a relay that is down would flood the log.
            log.warning(
                "%d of %d emails not sent (%s); first error: %s",
                len(troubled),
                len(outcomes),
                ", ".join(sorted({o.result for o in troubled})),
                troubled[0].error,
            )
        return len(claimed)

    async def _send_all(self, claimed: Sequence[Claimed]) -> list[Outcome]:
        """Send a batch, `concurrency` emails at a time: that many coroutines take the next email in
        turn (rather than one task an email, all but a few of them waiting for a connection)."""
        results: list[Outcome | None] = [None] * len(claimed)
        turns = iter(range(len(claimed)))

        async def take_turns() -> None:
            for index in turns:
                if self.stopping:
                    return
                if claimed[index].campaign_id in await self.holds.current():
                    continue  # paused or cancelled since the claim: left unsent, put back below
                place = self.recorder.place()
                try:
                    outcome = await self._send(claimed[index], place)
                except BaseException:  # cancelled (the process is stopping): no outcome will free it
                    self.recorder.release(place)
                    raise
                if outcome is not None:
                    self.recorder.add(outcome, place)
                results[index] = outcome

        await asyncio.gather(*(take_turns() for _ in range(min(len(claimed), self.config.concurrency))))
        return [outcome for outcome in results if outcome is not None]

    async def _send(self, item: Claimed, place: Place) -> Outcome | None:
        """Render and send one email; None when its lease is (nearly) over and it was left unsent:
        another worker may have taken the row back by now."""
        if item.lease_until is not None and self.clock() >= item.lease_until - self._lease_margin:
            return None

        def outcome(
            result: SendResult,
            *,
            message_id: str | None = None,
            error: str | None = None,
            defer_seconds: float = 0.0,
        ) -> Outcome:
            return Outcome(
                item.deliverable_id,
                item.campaign_id,
                item.contact_id,
                item.attempts,
                result,
                message_id=message_id,
                error=error,
                lease_until=item.lease_until,
                defer_seconds=defer_seconds,
            )

        if self._refused_unsigned and item.campaign_id in self._refused_unsigned:
            return outcome(SendResult.FAILED, error=self._refused_unsigned[item.campaign_id])
        try:
            compiled = self._compiled[item.campaign_id][1]
            recipient = Recipient(
                item.deliverable_id, item.email, item.first_name, item.last_name, item.fields
            )
            signed = self.dkim is not None and bool(self.dkim.keys_for_address(compiled.from_email))
            rendered = render(
                compiled,
                recipient,
                self.tokens,
                self.config.base_url,
                self.config.bounce_domain,
                to_sign=signed,
            )
            message = rendered.message
            if signed and self.dkim is not None:
                message = self.dkim.sign(message, compiled.from_email)
        except Exception as exc:  # one broken email never stops the rest of the campaign
            log.exception("could not render deliverable %s", item.deliverable_id)
            return outcome(SendResult.FAILED, error=f"render: {exc}"[:1000])
        try:
            await self.transport.send(
                rendered.envelope_from, rendered.envelope_to, message, rendered.sending_domain, place
            )
        except Deferred as exc:
            return outcome(SendResult.DEFERRED, error=str(exc)[:1000], defer_seconds=exc.delay)
        except TemporaryFailure as exc:
            return outcome(SendResult.RETRY, error=str(exc)[:1000])
        except PermanentFailure as exc:
            refused = SendResult.BLOCKED if exc.blocked else SendResult.FAILED
            return outcome(SendResult.BOUNCED if exc.bounce else refused, error=str(exc)[:1000])
        return outcome(SendResult.SENT, message_id=rendered.message_id)

    async def drain(self) -> int:
        """Fan out and send until nothing is due (tests, and `tidings worker --once`)."""
        await asyncio.to_thread(self.fan_out)
        total = 0
        while sent := await self.run_once():
            total += sent
        return total


def _lost(connection: Connection) -> bool:
    """Whether the database dropped the recording connection (record_sent runs on psycopg directly, so
    SQLAlchemy does not see the error that says so)."""
    driver = connection.connection.driver_connection
    return driver is None or bool(driver.closed) or bool(getattr(driver, "broken", False))
