"""The states of the work queues' rows and the kinds of watch actions, one `StrEnum` each.

Stored as their values in plain VARCHAR columns (`StateColumn`: no database enum type and no CHECK
constraint, so adding a member needs no migration), handed back as members. A member is a `str`, so it
equals its value, binds as one and serializes as one. The wire schemas show them inline as
`type: string, enum: [...]` (`app/kit/wire_enum.py`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Generic, TypeVar

from sqlalchemy import String, TypeDecorator
from sqlalchemy.engine import Dialect

E = TypeVar("E", bound=StrEnum)


class DeliverableState(StrEnum):
    """One email of a campaign (the send queue): `queued` -> (claimed) `sending` under a lease -> `sent`,
    `failed` or `bounced`, or back to `queued`. `cancelled`: a queued row whose contact, automation or
    campaign went away."""

    QUEUED = "queued"
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"
    BOUNCED = "bounced"
    CANCELLED = "cancelled"


class CampaignState(StrEnum):
    """Where a campaign's sending stands; computed from its timestamps and deliverables (a campaign has
    no state column), shown as `sending_state`."""

    DRAFT = "draft"
    QUEUED = "queued"
    SENDING = "sending"
    SENT = "sent"
    HALTED = "halted"
    # Beyond the first version: stopped by its sender, until resumed; stopped by its sender for good.
    PAUSED = "paused"
    CANCELLED = "cancelled"


class RunState(StrEnum):
    """One action's run on one feed item (the watch run queue). `failed` with no completion time waits
    for a retry; the others but `pending` and `running` are final."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    GATED = "gated"
    FAILED = "failed"
    ERRORED = "errored"
    SKIPPED = "skipped"


class DeliveryState(StrEnum):
    """One outbound call of a webhook action: `pending` while the call is made."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    ERRORED = "errored"
    FAILED = "failed"


class EventState(StrEnum):
    """One event for one account webhook (the events-out queue): `pending` (due at its next attempt) ->
    (claimed) `sending` under a lease -> `delivered`, `failed` for good, or `pending` again for a retry."""

    PENDING = "pending"
    SENDING = "sending"
    DELIVERED = "delivered"
    FAILED = "failed"


class ActionKind(StrEnum):
    """What a watch action does; each kind's implementation is `app/watches/actions/ACTIONS[kind]`."""

    SEMANTIC_FILTER = "semantic_filter"
    EXTRACT = "extract"
    LOG = "log"
    WEBHOOK = "webhook"
    # Beyond openmagpie: the items become a campaign of the email API (app/watches/actions/email.py).
    EMAIL = "email"


class BackfillState(StrEnum):
    """A backfill (`POST /v1/action-backfills`): the work is done in the request, so it is recorded done."""

    DONE = "done"


# States a run rests in for good (a `failed` run only once it has a completion time).
TERMINAL_RUN_STATES = (
    RunState.SUCCEEDED,
    RunState.GATED,
    RunState.FAILED,
    RunState.ERRORED,
    RunState.SKIPPED,
)


class StateColumn(TypeDecorator[E], Generic[E]):
    """A `StrEnum` in a VARCHAR: written as its value, read back as the member."""

    impl = String
    cache_ok = True

    def __init__(self, enum: type[E], length: int) -> None:
        super().__init__(length)
        self.enum = enum

    def process_result_value(self, value: Any, dialect: Dialect) -> E | None:
        return None if value is None else self.enum(value)
