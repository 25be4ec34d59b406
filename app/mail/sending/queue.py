"""The send queue: fan a due campaign out into deliverables, claim batches, record what happened.

Every function here is one short transaction run by a worker (`db.transaction`); none does network I/O.
The life of a deliverable: `queued` -> (claimed) `sending` with a lease -> `sent`, `failed` or `bounced`,
or back to `queued` with a later `send_after` (an SMTP 4xx, pacing, the daily cap, an expired lease).
`cancelled` is a queued row whose contact, automation or campaign went away, or whose campaign its
sender cancelled. Rows of a held campaign (paused or cancelled by its sender) are not claimed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import (
    ColumnElement,
    DateTime,
    Integer,
    String,
    Table,
    and_,
    bindparam,
    case,
    column,
    exists,
    func,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import Update
from sqlalchemy.sql.selectable import Select

from app.db import PsycopgStatement, among_parameter, psycopg_connection, skip_locked, upsert
from app.identity.accounts import daily_cap
from app.kit.time import account_zone, local_day, start_of_next_day
from app.mail.bounces.blocked import Refusal, attempted_at, blocked_by_domain, record_blocked
from app.mail.suppression_service import not_suppressed, suppress_contacts
from app.models import (
    Account,
    Automation,
    Campaign,
    CampaignList,
    Contact,
    ContactField,
    ContactFieldValue,
    ContactList,
    Deliverable,
    DeliverableState,
    ListMembership,
    Suppression,
)
from app.models.base import UTCDateTime

if TYPE_CHECKING:
    from app.config import Settings

# A fan-out of at least this many rows is followed by ANALYZE on PostgreSQL (see fan_out_due).
ANALYZE_AFTER_FAN_OUT = 5000
# Retries of an SMTP 4xx: 1, 2, 4 ... minutes, capped at an hour; given up after this many attempts.
MAX_ATTEMPTS = 8
# A campaign's last delivery error is kept to this length (a relay's reply can be long).
LAST_ERROR_CHARACTERS = 500
RETRY_BASE = timedelta(minutes=1)
RETRY_CAP = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class Limits:
    send_rate: float
    daily_send_limit: int
    lease: timedelta


@dataclass(frozen=True, slots=True)
class Claimed:
    deliverable_id: int
    account_id: int
    campaign_id: int
    contact_id: int
    email: str
    first_name: str | None
    last_name: str | None
    attempts: int
    fields: dict[str, str] = field(default_factory=dict)
    # The lease this claim wrote: with the id, it tells this claim's row from a later claim of it.
    lease_until: datetime | None = None
    # The campaign's updated_at and its account's open-pixel switch, read by the claim: a worker
    # recompiles the campaign when they differ from those it compiled it from.
    campaign_stamp: tuple[datetime, bool] = field(kw_only=True)


class SendResult(StrEnum):
    """What the transport said of one email (and the label of `tidings_emails_total`)."""

    SENT = "sent"
    # A temporary failure: queued again for later, until MAX_ATTEMPTS.
    RETRY = "retry"
    FAILED = "failed"
    BOUNCED = "bounced"
    # Refused as a sender problem (bounce_classes.py): failed, recorded per receiving domain, no bounce.
    BLOCKED = "blocked"
    # Held back by the relay's or the receiving domain's pace, or throttled (pace.py): queued again for
    # `defer_seconds` later without spending an attempt. Never a failure.
    DEFERRED = "deferred"


@dataclass(frozen=True, slots=True)
class Outcome:
    deliverable_id: int
    campaign_id: int
    contact_id: int
    attempts: int
    result: SendResult
    message_id: str | None = None
    error: str | None = None
    # The claim's lease (Claimed.lease_until): the result is written only while the row is still held
    # under it. None: under whatever lease the row has.
    lease_until: datetime | None = None
    # DEFERRED: how long from now the email waits.
    defer_seconds: float = 0.0


def aware(moment: datetime) -> datetime:
    """Columns hand back aware UTC datetimes; compare like with like (naive input is taken as UTC)."""
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


# --- fan-out --------------------------------------------------------------------------------------


def recipients_of(campaign_id: int, account_id: int) -> ColumnElement[bool]:
    """Subscribed, live, never-bounced contacts in any live list of the campaign, each once, whose
    address is not on the account's suppression list."""
    in_lists = (
        select(ListMembership.contact_id)
        .join(CampaignList, CampaignList.list_id == ListMembership.list_id)
        .join(ContactList, ContactList.id == ListMembership.list_id)
        .where(
            CampaignList.campaign_id == campaign_id,
            ContactList.deleted_at.is_(None),
            ListMembership.contact_id == Contact.id,
        )
    )
    return and_(
        Contact.account_id == account_id,
        Contact.deleted_at.is_(None),
        Contact.unsubscribed_at.is_(None),
        Contact.bounced_at.is_(None),
        not_suppressed(account_id, Contact.email_key),
        exists(in_lists),
    )


# The deliverable columns a fan-out or an automation schedule writes with INSERT ... SELECT, in the
# order their SELECTs list them.
QUEUED_COLUMNS = [
    "account_id",
    "campaign_id",
    "contact_id",
    "state",
    "send_after",
    "attempts",
    "created_at",
    "updated_at",
]


def fan_out_due(session: Session, now: datetime, limit: int = 10) -> dict[int, int]:
    """Turn campaigns whose scheduled_at has come into queued deliverables; returns how many emails
    each campaign queued, by id, in the order they were taken.

    The campaign row is locked (skipped by other workers) and `sent_at` set in the same transaction as
    the INSERT ... SELECT, so a campaign is fanned out exactly once even with several workers.
    """
    now = aware(now)
    due = session.execute(
        select(Campaign.id, Campaign.account_id)
        .where(
            Campaign.scheduled_at <= now,
            Campaign.sent_at.is_(None),
            Campaign.deleted_at.is_(None),
            Campaign.automation_id.is_(None),
            Campaign.held_at.is_(None),  # paused or cancelled before it started
        )
        .order_by(Campaign.scheduled_at, Campaign.id)
        .limit(limit)
        .with_for_update(**skip_locked(session))
    ).all()
    queued: dict[int, int] = {}
    for campaign_id, account_id in due:
        rows = (
            select(
                literal(account_id),
                literal(campaign_id),
                Contact.id,
                literal(DeliverableState.QUEUED, String()),
                literal(now, UTCDateTime()),
                literal(0),
                literal(now, UTCDateTime()),
                literal(now, UTCDateTime()),
            )
            .where(recipients_of(campaign_id, account_id))
            .order_by(Contact.id)
        )
        inserted = session.execute(
            upsert(session, Deliverable)
            .from_select(QUEUED_COLUMNS, rows)
            .on_conflict_do_nothing(index_elements=["campaign_id", "contact_id"])
            .execution_options(preserve_rowcount=True)  # SQLAlchemy reports an INSERT's count only so
        )
        queued[campaign_id] = int(inserted.rowcount or 0)  # type: ignore[attr-defined]
        started = update(Campaign).where(Campaign.id == campaign_id).values(sent_at=now, updated_at=now)
        session.execute(started)
    if sum(queued.values()) >= ANALYZE_AFTER_FAN_OUT and session.get_bind().dialect.name == "postgresql":
        # The claim's plan rests on the planner knowing how many rows are queued. Statistics from
        # before a large fan-out say "almost none", and PostgreSQL then sorts the whole queue on every
        # claim instead of reading the first rows of its index: seconds a claim at a million rows.
        # ANALYZE here counts this transaction's own new rows; its figures are seen from the commit on.
        session.execute(text("ANALYZE deliverables"))
    return queued


# --- claiming ------------------------------------------------------------------------------------


def claim_batch(
    session: Session, now: datetime, size: int, limits: Limits, *, load_fields: bool = True
) -> list[Claimed]:
    """Take up to `size` due deliverables: mark them `sending` under a lease and return what to send.
    With `load_fields` False, `fields` stays empty (the caller loads them if a template needs them).

    Rows of a contact that can no longer receive (unsubscribed, bounced, deleted, its address
    suppressed since the row was queued) are cancelled here; rows of a paused automation or of a held
    campaign stay queued. Pacing and the daily cap move rows they hold back to a later `send_after`
    instead of leaving them to be claimed again at once.
    """
    now = aware(now)
    postgres = session.get_bind().dialect.name == "postgresql"
    rows = session.execute(_due_rows_statement(postgres), {"now": now, "size": size}).all()
    if not rows:
        return []
    _cancel_unreachable(session, rows, now)
    lease_until = now + limits.lease
    fields = custom_fields_of(session, [row[3] for row in rows if row[-1]]) if load_fields else {}
    caps = {row[1]: row[8] for row in rows}  # each account's own daily cap, by account id
    allowed, deferred = _apply_account_limits(
        session, _claims_of(rows, fields, lease_until), caps, now, limits
    )
    _defer(session, deferred, now)
    if not allowed:
        return []
    _mark_sending(session, allowed, lease_until, now)
    return allowed


@cache
def _due_rows_statement(postgres: bool) -> Select[Any]:
    """Up to `size` due deliverables, locked, in queue order, each with its contact's address and names,
    its account's daily cap, the stamp its campaign was compiled from (see Claimed.campaign_stamp), and
    whether the contact can still receive (the last column). Built once: made afresh on every claim,
    the statement and its cache key cost more CPU than running it.

    The rows to take, locked, on their own: a single-table query down the queue's partial index in its
    order, which stops after `size` rows (fan_out_due keeps the planner's idea of the queue's size
    current). Joined to contacts and campaigns in the same query, the planner could start from the
    campaign and sort every queued row of it on each claim; joined outside it, by key, they cost a
    lookup a row.
    """
    table = cast(Table, Deliverable.__table__)
    # Campaigns of paused automations and campaigns held by their sender (paused or cancelled), usually
    # none. NOT IN, not NOT EXISTS: PostgreSQL plans it as one hashed look-up it fills once per claim, a
    # filter on the index scan, where it misjudged a NOT EXISTS (an anti-join) and sorted the whole
    # queue instead of reading its index in order. SQLite too runs the list once.
    paused = (
        select(Campaign.id)
        .join(Automation, Automation.id == Campaign.automation_id)
        .where(Automation.active.is_not(True))
        .union(select(Campaign.id).where(Campaign.held_at.is_not(None)))
    )
    head = (
        select(
            table.c.id,
            table.c.account_id,
            table.c.campaign_id,
            table.c.contact_id,
            table.c.attempts,
            table.c.send_after,
        )
        .where(
            table.c.state == DeliverableState.QUEUED,
            table.c.send_after <= bindparam("now", type_=table.c.send_after.type),
            table.c.campaign_id.not_in(paused),
        )
        .order_by(table.c.send_after, table.c.id)
        .limit(bindparam("size", type_=Integer()))
        .with_for_update(skip_locked=postgres)
        .subquery("head")
    )
    sendable = and_(
        Contact.deleted_at.is_(None),
        Contact.unsubscribed_at.is_(None),
        Contact.bounced_at.is_(None),
        Suppression.id.is_(None),
    )
    return (
        select(
            head.c.id,
            head.c.account_id,
            head.c.campaign_id,
            head.c.contact_id,
            head.c.attempts,
            Contact.email,
            Contact.first_name,
            Contact.last_name,
            Account.daily_send_limit,
            Campaign.updated_at,
            Account.track_opens,
            sendable.label("sendable"),
        )
        .join(Contact, Contact.id == head.c.contact_id)
        .join(Account, Account.id == head.c.account_id)
        .join(Campaign, Campaign.id == head.c.campaign_id)
        .outerjoin(
            Suppression,
            and_(Suppression.account_id == head.c.account_id, Suppression.email_key == Contact.email_key),
        )
        .order_by(head.c.send_after, head.c.id)
    )


def _cancel_unreachable(session: Session, rows: Sequence[Any], now: datetime) -> None:
    """Cancel the rows whose contact can no longer receive email."""
    cancelled = [row[0] for row in rows if not row[-1]]
    if cancelled:
        session.execute(
            update(Deliverable)
            .where(Deliverable.id.in_(cancelled))
            .values(
                state=DeliverableState.CANCELLED, error="contact can no longer receive email", updated_at=now
            )
            .execution_options(synchronize_session=False)
        )


def _claims_of(
    rows: Sequence[Any], fields: dict[int, dict[str, str]], lease_until: datetime
) -> list[Claimed]:
    """What to send for each row whose contact can still receive."""
    # Unpacked by position: named access to 200 rows' columns costs more than the rest of this loop.
    return [
        Claimed(
            row_id,
            account,
            campaign,
            contact,
            email,
            first,
            last,
            tries + 1,
            fields.get(contact) or {},
            lease_until,
            campaign_stamp=(edited, opens),
        )
        for row_id, account, campaign, contact, tries, email, first, last, _cap, edited, opens, ok in rows
        if ok
    ]


def _defer(session: Session, deferred: list[tuple[int, datetime]], now: datetime) -> None:
    """Move the rows pacing or the daily cap hold back to their later `send_after`."""
    if deferred:
        session.execute(
            update(Deliverable),
            [{"id": row_id, "send_after": moment, "updated_at": now} for row_id, moment in deferred],
        )


def _mark_sending(session: Session, allowed: list[Claimed], lease_until: datetime, now: datetime) -> None:
    """The claimed rows become `sending` under the lease, one attempt more."""
    postgres = session.get_bind().dialect.name == "postgresql"
    session.execute(
        _mark_sending_statement(postgres),
        {"ids": [claimed.deliverable_id for claimed in allowed], "lease": lease_until, "now": now},
        execution_options={"synchronize_session": False},  # no Deliverable objects in this session
    )


@cache
def _mark_sending_statement(postgres: bool) -> Update:
    """Built once, with its ids as one parameter (db.among_parameter): made afresh on every claim, the
    statement and its cache key cost more CPU than the UPDATE."""
    table = cast(Table, Deliverable.__table__)
    return (
        update(table)
        .where(among_parameter(table.c.id, "ids", Integer(), postgres=postgres))
        .values(
            state=DeliverableState.SENDING,
            lease_until=bindparam("lease", type_=table.c.lease_until.type),
            attempts=table.c.attempts + 1,
            updated_at=bindparam("now", type_=table.c.updated_at.type),
        )
    )


def _apply_account_limits(
    session: Session, rows: Sequence[Claimed], caps: dict[int, int | None], now: datetime, limits: Limits
) -> tuple[list[Claimed], list[tuple[int, datetime]]]:
    """Split claimed rows into those to send now and (id, send_after) of those to hold back.

    Pacing is a shared virtual clock per account (`next_send_at`): each email takes the next slot,
    1/rate seconds after the one before, and a row whose slot is more than a second away waits for it.
    The daily cap counts emails handed to workers per day of the account's own time zone
    (`sent_today`, of the local day `sent_day`); over it, rows wait for the account's next local
    midnight. The account rows are locked only when one of the two applies. `caps`: each account's
    own daily cap, by id, as the claim read it.
    """
    account_ids = sorted({row.account_id for row in rows})

    def cap_of(account_id: int) -> int:
        return daily_cap(caps.get(account_id), limits.daily_send_limit)

    limited = [a for a in account_ids if limits.send_rate > 0 or cap_of(a) > 0]
    if not limited:
        return list(rows), []
    accounts = {
        account.id: account for account in session.scalars(_locked_accounts_statement(), {"ids": limited})
    }
    zones = {account.id: account_zone(account.timezone) for account in accounts.values()}
    allowed: list[Claimed] = []
    deferred: list[tuple[int, datetime]] = []
    held_back: dict[int, int] = defaultdict(int)
    for row in rows:
        account = accounts.get(row.account_id)
        if account is None:
            allowed.append(row)
            continue
        today = local_day(now, zones[account.id])
        if account.sent_day != today:
            account.sent_day, account.sent_today = today, 0
        cap = cap_of(account.id)
        if cap > 0 and account.sent_today >= cap:
            deferred.append((row.deliverable_id, start_of_next_day(now, zones[account.id])))
            continue
        if limits.send_rate > 0:
            interval = timedelta(seconds=1 / limits.send_rate)
            slot = max(now, account.next_send_at or now)
            if slot > now + timedelta(seconds=1):
                held_back[account.id] += 1
                deferred.append((row.deliverable_id, slot + interval * (held_back[account.id] - 1)))
                continue
            account.next_send_at = slot + interval
        account.sent_today += 1
        allowed.append(row)
    return allowed, deferred


@cache
def _locked_accounts_statement() -> Select[Account]:
    """Built once (see _due_rows_statement), its ids one expanding parameter."""
    return (
        select(Account)
        .where(Account.id.in_(bindparam("ids", expanding=True)))
        .order_by(Account.id)
        .with_for_update()
    )


def custom_fields_of(session: Session, contact_ids: Iterable[int]) -> dict[int, dict[str, str]]:
    """Custom field values of the given contacts, by contact id and lowercased field name."""
    found: dict[int, dict[str, str]] = defaultdict(dict)
    ids = list(contact_ids)
    if not ids:
        return found
    postgres = session.get_bind().dialect.name == "postgresql"
    for contact_id, name, value in session.execute(_custom_fields_statement(postgres), {"ids": ids}):
        found[contact_id][name.lower()] = value
    return found


@cache
def _custom_fields_statement(postgres: bool) -> Select[int, str, str]:
    """Built once (see _due_rows_statement), its ids one parameter (db.among_parameter)."""
    return (
        select(ContactFieldValue.contact_id, ContactField.name, ContactFieldValue.value)
        .join(ContactField, ContactField.id == ContactFieldValue.field_id)
        .where(among_parameter(ContactFieldValue.contact_id, "ids", Integer(), postgres=postgres))
    )


# --- results ------------------------------------------------------------------------------------


def retry_delay(attempts: int) -> timedelta:
    delay: timedelta = RETRY_BASE * (2 ** max(0, attempts - 1))
    return min(RETRY_CAP, delay)


def record_outcomes(session: Session, outcomes: Sequence[Outcome], now: datetime, rule: BounceRule) -> None:
    """Write what the transport said. Only rows still `sending` under the claim's lease change (a row
    taken back meanwhile, after its lease ran out, belongs to whoever holds it now)."""
    now = aware(now)
    _record_sent(session, [o for o in outcomes if o.result == SendResult.SENT], now)
    retries = [o for o in outcomes if o.result == SendResult.RETRY]
    _update_each(
        session,
        retries,
        lambda o: (
            {
                "state": DeliverableState.QUEUED,
                "send_after": now + retry_delay(o.attempts),
                "lease_until": None,
                "error": o.error,
                "updated_at": now,
            }
            if o.attempts < MAX_ATTEMPTS
            else {
                "state": DeliverableState.FAILED,
                "lease_until": None,
                "error": f"gave up: {o.error}",
                "updated_at": now,
            }
        ),
    )
    _update_each(
        session,
        [o for o in outcomes if o.result == SendResult.DEFERRED],
        lambda o: {
            "state": DeliverableState.QUEUED,
            "send_after": now + timedelta(seconds=o.defer_seconds),
            "lease_until": None,
            # The claim's attempt is given back: a deferral is the relay's pace, not a failure.
            "attempts": o.attempts - 1,
            "error": o.error,
            "updated_at": now,
        },
    )
    failed = [o for o in outcomes if o.result in (SendResult.FAILED, SendResult.BOUNCED, SendResult.BLOCKED)]
    _update_each(
        session,
        failed,
        lambda o: {
            "state": DeliverableState.BOUNCED if o.result == SendResult.BOUNCED else DeliverableState.FAILED,
            "lease_until": None,
            "error": o.error,
            "bounced_at": now if o.result == SendResult.BOUNCED else None,
            "updated_at": now,
        },
    )
    note_delivery_errors(session, [*retries, *[o for o in failed if o.result == SendResult.FAILED]], now)
    bounced_contacts = [o.contact_id for o in outcomes if o.result == SendResult.BOUNCED]
    if bounced_contacts:
        session.execute(
            update(Contact)
            .where(Contact.id.in_(bounced_contacts), Contact.bounced_at.is_(None))
            .values(bounced_at=now, updated_at=now)
        )
        suppress_contacts(session, bounced_contacts, "bounce", now)
        stop_bouncing_campaigns(
            session, {o.campaign_id for o in outcomes if o.result == SendResult.BOUNCED}, now, rule
        )
    if failed:
        _record_blocked_outcomes(session, failed, now, rule)


def _record_blocked_outcomes(
    session: Session, failed: Sequence[Outcome], now: datetime, rule: BounceRule
) -> None:
    refused = [Refusal(o.deliverable_id, o.error) for o in failed if o.result == SendResult.BLOCKED]
    if refused:
        stop_bouncing_campaigns(session, record_blocked(session, refused, now), now, rule)


def note_delivery_errors(session: Session, troubled: Sequence[Outcome], now: datetime) -> None:
    """Each campaign keeps the last error its emails met (a refused connection, a relay's 4xx or 5xx),
    so its view says why it is not getting out. Only failures and retries come here: a sent email
    costs nothing more."""
    last_of: dict[int, str] = {}
    for outcome in troubled:
        last_of[outcome.campaign_id] = (outcome.error or "unknown error")[:LAST_ERROR_CHARACTERS]
    if last_of:
        # An ORM bulk UPDATE by primary key: one statement, run for each campaign.
        session.execute(
            update(Campaign),
            [
                {"id": campaign_id, "last_delivery_error": error, "last_delivery_error_at": now}
                for campaign_id, error in last_of.items()
            ],
        )


def _still_held(lease_until: datetime | None) -> ColumnElement[bool]:
    held = Deliverable.state == DeliverableState.SENDING
    return held if lease_until is None else and_(held, Deliverable.lease_until == lease_until)


def _record_sent(session: Session, sent: Sequence[Outcome], now: datetime) -> None:
    """The common case, nearly every row, in one statement although each row has its own Message-ID (see
    _sent_write)."""
    if not sent:
        return
    statement, parameters = _sent_write(session.get_bind().dialect.name == "postgresql", sent, now)
    session.execute(statement, parameters)


def record_sent(connection: Connection, sent: Sequence[Outcome], now: datetime) -> None:
    """Sent outcomes alone (nearly every group the recorder writes) on a connection of their own in
    autocommit: each statement is atomic and fenced by the claim's lease, so it needs no transaction
    around it, nor the session, pool check-out with its ping, BEGIN and COMMIT that one would cost.

    On PostgreSQL the statement, compiled once, goes straight to psycopg: SQLAlchemy's execution
    (cache key, parameter processing, result set-up) cost a third of the CPU of recording a group
    (`tests/benchmarks/record.py`, alternated: 360 and 450 us a group of 16 through SQLAlchemy, 266 and
    300 straight). Errors are psycopg's own, not wrapped in SQLAlchemy's DBAPIError."""
    if connection.dialect.name != "postgresql":
        statement, parameters = _sent_write(False, sent, aware(now))
        connection.execute(statement, parameters)
        return
    ids, message_ids, leases = _sent_columns(sent)
    sql = _sent_psycopg()
    psycopg_connection(connection).execute(
        sql.sql, sql.params(now=naive_utc(now), ids=ids, message_ids=message_ids, leases=leases)
    )


def naive_utc(moment: datetime) -> datetime:
    """What a UTCDateTime column is given (naive UTC), for statements run on psycopg directly."""
    return (moment.astimezone(UTC) if moment.tzinfo else moment).replace(tzinfo=None)


def _sent_columns(sent: Sequence[Outcome]) -> tuple[list[int], list[str | None], list[datetime | None]]:
    """The sent rows' ids, Message-IDs and the leases they were claimed under (naive UTC), row by row."""
    return (
        [outcome.deliverable_id for outcome in sent],
        [outcome.message_id for outcome in sent],
        [None if outcome.lease_until is None else naive_utc(outcome.lease_until) for outcome in sent],
    )


@cache
def _sent_psycopg() -> PsycopgStatement:
    """_sent_statement on PostgreSQL, compiled once to psycopg's SQL."""
    return PsycopgStatement.of(_sent_statement(True), binary=("ids", "message_ids", "leases"))


def _sent_write(
    postgres: bool, sent: Sequence[Outcome], now: datetime
) -> tuple[Update, dict[str, Any] | list[dict[str, Any]]]:
    """The statement that records sent rows, with its parameters: on PostgreSQL an UPDATE joined to the
    unnested arrays of ids, Message-IDs and leases, elsewhere one UPDATE run for all rows (an
    executemany). One statement for every lease: a group the recorder writes holds the emails of
    several lanes' batches, each claimed under a lease of its own, and a statement a lease (each a round
    trip and a commit) made a group's write three times as long, while the senders wait for it once the
    next group is full (recorder.py)."""
    ids, message_ids, leases = _sent_columns(sent)
    statement = _sent_statement(postgres)
    if postgres:
        return statement, {"now": now, "ids": ids, "message_ids": message_ids, "leases": leases}
    rows = [
        {"row_id": row_id, "row_message_id": message_id, "row_lease": lease, "now": now}
        for row_id, message_id, lease in zip(ids, message_ids, leases, strict=True)
    ]
    return statement, rows


@cache
def _sent_statement(postgres: bool) -> Update:
    """Built once and reused with new parameters: the recorder runs it many times a second, and building
    a statement and its cache key cost more than running it. Each row is fenced by its own claim's lease
    (a row claimed without one, by the state alone)."""
    # The Core table, not the mapped class: the ORM's bulk UPDATE would want the key in the values.
    table = cast(Table, Deliverable.__table__)
    now = bindparam("now", type_=table.c.updated_at.type)
    done = {
        "state": DeliverableState.SENT,
        "sent_at": now,
        "lease_until": None,
        "error": None,
        "updated_at": now,
    }
    held = table.c.state == DeliverableState.SENDING
    if postgres:
        rows = (
            func.unnest(
                bindparam("ids", type_=postgresql.ARRAY(Integer)),
                bindparam("message_ids", type_=postgresql.ARRAY(String)),
                bindparam("leases", type_=postgresql.ARRAY(DateTime())),
            )
            .table_valued("id", "message_id", column("lease", DateTime()))
            .render_derived(name="sent_rows")
        )
        still_mine = or_(rows.c.lease.is_(None), table.c.lease_until == rows.c.lease)
        return (
            update(table)
            .where(table.c.id == rows.c.id, held, still_mine)
            .values(message_id=rows.c.message_id, **done)
        )
    lease = bindparam("row_lease", type_=table.c.lease_until.type)
    return (
        update(table)
        .where(table.c.id == bindparam("row_id"), held, or_(lease.is_(None), table.c.lease_until == lease))
        .values(message_id=bindparam("row_message_id"), **done)
    )


def _update_each(
    session: Session, outcomes: Sequence[Outcome], values: Callable[[Outcome], dict[str, Any]]
) -> None:
    """Update rows in as few statements as there are distinct value sets and leases."""
    groups: dict[tuple[datetime | None, tuple[tuple[str, Any], ...]], list[int]] = defaultdict(list)
    for outcome in outcomes:
        groups[outcome.lease_until, tuple(sorted(values(outcome).items()))].append(outcome.deliverable_id)
    for (lease_until, key), ids in groups.items():
        still_mine = and_(Deliverable.id.in_(ids), _still_held(lease_until))
        session.execute(
            update(Deliverable)
            .where(still_mine)
            .values(dict(key))
            .execution_options(synchronize_session=False)
        )


@dataclass(frozen=True, slots=True)
class BounceRule:
    """A running campaign stops once more than `rate` of at least `min_sent` attempted emails bounced,
    or once more than `complaint_rate` of at least `complaint_min_sent` delivered emails (sent and not
    bounced) drew a spam complaint."""

    rate: float = 0.1
    min_sent: int = 50
    complaint_rate: float = 0.001
    complaint_min_sent: int = 1000
    # ... or once more than `blocked_rate` of its attempted emails to one receiving domain were refused
    # as `blocked` (the sender's problem, app/mail/bounces/blocked.py), at least `blocked_min` of them.
    blocked_rate: float = 0.1
    blocked_min: int = 10

    @classmethod
    def from_settings(cls, settings: Settings) -> BounceRule:
        return cls(
            settings.bounce_stop_rate,
            settings.bounce_stop_min_sent,
            settings.complaint_stop_rate,
            settings.complaint_stop_min_sent,
            settings.blocked_stop_rate,
            settings.blocked_stop_min,
        )


def _past(count: int, of: int, rate: float, at_least: int) -> bool:
    """More than `rate` of `of` emails, once there are at least `at_least` of them."""
    return of > 0 and of >= at_least and count / of > rate


def _percent(rate: float) -> str:
    return f"{rate * 100:g}%"


def stop_bouncing_campaigns(
    session: Session, campaign_ids: Iterable[int], now: datetime, rule: BounceRule
) -> list[int]:
    """Halt each running campaign whose bounce rate, complaint rate or blocked rate at one receiving
    domain passed its threshold: cancel what is still queued."""
    ids = sorted(set(campaign_ids))
    if not ids:
        return []
    reasons: dict[int, str] = {}
    running: list[int] = []
    bounced_unsent = and_(Deliverable.state == DeliverableState.BOUNCED, Deliverable.sent_at.is_(None))
    for campaign_id, attempted, bounced, delivered, complaints in session.execute(
        select(
            Deliverable.campaign_id,
            # Refused at the SMTP dialogue: bounced without ever being sent.
            func.count(Deliverable.sent_at) + func.count(case((bounced_unsent, 1))),
            func.count(Deliverable.bounced_at),
            func.count(case((and_(Deliverable.sent_at.is_not(None), Deliverable.bounced_at.is_(None)), 1))),
            func.count(Deliverable.spam_at),
        )
        .where(Deliverable.campaign_id.in_(ids))
        .group_by(Deliverable.campaign_id)
        # Only a campaign still sending can stop: a late bounce report leaves a finished one alone.
        .having(
            func.count(case((Deliverable.state.in_((DeliverableState.QUEUED, DeliverableState.SENDING)), 1)))
            > 0
        )
    ):
        running.append(campaign_id)
        if _past(bounced, attempted, rule.rate, rule.min_sent):
            reasons[campaign_id] = f"stopped: more than {_percent(rule.rate)} of its emails bounced"
        elif _past(complaints, delivered, rule.complaint_rate, rule.complaint_min_sent):
            reasons[campaign_id] = (
                f"stopped: more than {_percent(rule.complaint_rate)} of its delivered emails were "
                "reported as spam"
            )
    reasons.update(_blocked_reasons(session, [c for c in running if c not in reasons], rule))
    for reason in set(reasons.values()):
        stopped = sorted(campaign_id for campaign_id, why in reasons.items() if why == reason)
        session.execute(
            update(Campaign)
            .where(Campaign.id.in_(stopped), Campaign.halted_at.is_(None))
            .values(halted_at=now, halt_reason=reason, updated_at=now)
        )
        session.execute(
            update(Deliverable)
            .where(Deliverable.campaign_id.in_(stopped), Deliverable.state == DeliverableState.QUEUED)
            .values(state=DeliverableState.CANCELLED, error=reason, updated_at=now)
        )
    return sorted(reasons)


def _blocked_reasons(session: Session, campaign_ids: list[int], rule: BounceRule) -> dict[int, str]:
    """The campaigns that one receiving domain refused too often as `blocked`, with the reason to show."""
    reasons: dict[int, str] = {}
    for campaign_id, domains in blocked_by_domain(session, campaign_ids).items():
        for count in domains:
            if count.blocked < rule.blocked_min:
                break  # the most refused domain first
            attempted = attempted_at(session, campaign_id, count.domain)
            if _past(count.blocked, attempted, rule.blocked_rate, rule.blocked_min):
                status = f" ({count.status})" if count.status else ""
                reasons[campaign_id] = (
                    f"stopped: {count.domain} refused {count.blocked} of {attempted} emails as a sender "
                    f"problem{status}; check DKIM, SPF, DMARC and the sending reputation"
                )[:255]
                break
    return reasons


def release_expired_leases(session: Session, now: datetime) -> int:
    """A worker that died mid-batch left rows `sending`; past their lease they go back to the queue."""
    now = aware(now)
    result = session.execute(
        update(Deliverable)
        .where(Deliverable.state == DeliverableState.SENDING, Deliverable.lease_until < now)
        .values(state=DeliverableState.QUEUED, lease_until=None, send_after=now, updated_at=now)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def release_unsent(session: Session, unsent: Sequence[Claimed], now: datetime) -> int:
    """Claimed rows this worker did not start (it is stopping, or their lease was running out) go back to
    the queue at once, as if never claimed (the claim's attempt is given back); only while still held
    under the claim's lease."""
    now = aware(now)
    released = 0
    by_lease: dict[datetime | None, list[int]] = defaultdict(list)
    for item in unsent:
        by_lease[item.lease_until].append(item.deliverable_id)
    for lease_until, ids in by_lease.items():
        result = session.execute(
            update(Deliverable)
            .where(Deliverable.id.in_(ids), _still_held(lease_until))
            .values(
                state=DeliverableState.QUEUED,
                lease_until=None,
                attempts=Deliverable.attempts - 1,
                send_after=now,
                updated_at=now,
            )
            .execution_options(synchronize_session=False)
        )
        released += int(result.rowcount or 0)  # type: ignore[attr-defined]
    return released


def first_lists(session: Session, campaign_ids: list[int]) -> dict[int, int]:
    """Each campaign's lowest list id (its List-Id), once per compile, not per email."""
    if not campaign_ids:
        return {}
    rows = session.execute(
        select(CampaignList.campaign_id, func.min(CampaignList.list_id))
        .where(CampaignList.campaign_id.in_(campaign_ids))
        .group_by(CampaignList.campaign_id)
    )
    return {campaign_id: list_id for campaign_id, list_id in rows}
