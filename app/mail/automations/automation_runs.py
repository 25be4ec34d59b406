"""Automation runs: when a trigger fires for contacts, queue the automation's emails for them; pausing.

What Tidings decides where SendFox is silent (docs/compatibility.md sums it up):

- `apply_list` fires when a contact newly joins the trigger's list: a list membership that did not
  exist before (POST /contacts, PATCH /contacts/{id}, POST /contacts/batch, a hosted form's
  confirmation; all go through the membership service in contact_service.py). Naming a list the contact is
  already on fires nothing. Leaving the list later does not stop emails already queued.
- `open_campaign` and `click_campaign` fire on a contact's first open and first click of the trigger
  campaign. A click that comes before any recorded open is also the first open.
- Only active, not deleted automations fire, and only for subscribed, live, never-bounced contacts of
  the automation's account whose address is not on its suppression list (suppression_service.py). A
  trigger that happens while the automation is off is not caught up later.
- Firing queues every email of the automation at once, one deliverable each: in send_order order,
  email n is due at the trigger's moment plus the delay_hours of emails 1 to n added up (email 1 at
  +d1, email 2 at +d1+d2, ...). An email whose campaign was halted (bounce rate) is skipped; the ones
  after it keep their times.
- A contact gets each automation email at most once (one deliverable per campaign and contact): a second
  trigger, a rejoin, or a contact restored after deletion schedules nothing that existed before, even
  a cancelled email.
- Emails added to an automation later, edits of delay_hours or send_order, and a changed trigger apply
  to triggers from then on; emails already queued keep their times.
- PATCH active=false records paused_at; the worker leaves the automation's queued emails alone while it
  is off. PATCH active=true moves every queued email of the automation later by the length of the pause
  (so their spacing, and their distance from the trigger, is kept) and clears paused_at. On SQLite the
  pause is counted in whole seconds.
- Cancelling: unsubscribing, bouncing or deleting a contact cancels its queued emails; deleting the
  automation cancels all of its queued emails (automations.cancel_automation_sends).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Exists, Interval, Select, String, and_, case, func, literal, select, update
from sqlalchemy.orm import Session

from app.db import upsert
from app.mail.sending.queue import QUEUED_COLUMNS, aware
from app.mail.suppression_service import not_suppressed
from app.models import (
    Automation,
    AutomationItem,
    AutomationTrigger,
    Campaign,
    Contact,
    Deliverable,
    DeliverableState,
)
from app.models.base import UTCDateTime


def on_lists_joined(
    session: Session, account_id: int, joined: Iterable[tuple[int, int]], at: datetime
) -> int:
    """New memberships (contact_id, list_id) of one account, made at `at`: fire apply_list triggers.
    Returns how many deliverables were queued."""
    pairs = list(joined)
    if not pairs:
        return 0
    list_ids = {list_id for _, list_id in pairs}
    automations_by_list: dict[int, set[int]] = defaultdict(set)
    for automation_id, list_id in session.execute(
        select(AutomationTrigger.automation_id, AutomationTrigger.list_id)
        .join(Automation, Automation.id == AutomationTrigger.automation_id)
        .where(
            AutomationTrigger.type == "apply_list",
            AutomationTrigger.list_id.in_(list_ids),
            _live_automation(account_id),
        )
    ):
        if list_id is not None:  # the IN above says so; the column type does not
            automations_by_list[list_id].add(automation_id)
    if not automations_by_list:
        return 0
    contacts_by_automation: dict[int, set[int]] = defaultdict(set)
    for contact_id, list_id in pairs:
        for automation_id in automations_by_list.get(list_id, ()):
            contacts_by_automation[automation_id].add(contact_id)
    return _schedule(session, account_id, contacts_by_automation, at)


def _campaign_triggers(trigger_type: str, campaign_id: Any, account_id: Any) -> Select[int]:
    """The live automations a campaign's `open_campaign` or `click_campaign` event fires (the ids and
    the account may be values or columns of an enclosing statement)."""
    return (
        select(AutomationTrigger.automation_id)
        .join(Automation, Automation.id == AutomationTrigger.automation_id)
        .where(
            AutomationTrigger.type == trigger_type,
            AutomationTrigger.campaign_id == campaign_id,
            _live_automation(account_id),
        )
    )


def fires_on_campaign_event(trigger_type: str, campaign_id: Any, account_id: Any) -> Exists:
    """Whether the event would fire any automation: for a statement that must know beforehand."""
    return _campaign_triggers(trigger_type, campaign_id, account_id).exists()


def on_campaign_event(
    session: Session, account_id: int, campaign_id: int, contact_id: int, trigger_type: str, at: datetime
) -> int:
    """A contact's first open (`open_campaign`) or click (`click_campaign`) of a campaign at `at`."""
    automation_ids = session.scalars(_campaign_triggers(trigger_type, campaign_id, account_id)).all()
    if not automation_ids:
        return 0
    return _schedule(session, account_id, {a: {contact_id} for a in automation_ids}, at)


def set_active(session: Session, automation: Automation, active: bool, now: datetime) -> None:
    """Switch an automation on or off; on again, its queued emails move later by the pause's length."""
    if active == automation.active:
        return
    if not active:
        automation.active = False
        automation.paused_at = now
        return
    if automation.paused_at is not None:
        shift_queued(session, automation.id, now - automation.paused_at, now)
    automation.active = True
    automation.paused_at = None


def shift_queued(session: Session, automation_id: int, by: timedelta, now: datetime) -> int:
    """Move every queued email of the automation later by `by`, in one UPDATE."""
    later: Any
    if session.get_bind().dialect.name == "postgresql":
        if by <= timedelta(0):
            return 0
        # Typed, or the column's own type (a datetime) would be asked to bind the interval.
        later = Deliverable.send_after + literal(by, Interval())
    else:
        seconds = int(by.total_seconds())
        if seconds <= 0:
            return 0
        # SQLite keeps timestamps as 'YYYY-MM-DD HH:MM:SS.ffffff' text (SQLAlchemy's format) and its
        # date functions drop the microseconds: shift the whole seconds, then put the fraction back.
        shifted = func.strftime("%Y-%m-%d %H:%M:%S", Deliverable.send_after, f"+{seconds} seconds")
        later = shifted.op("||")(func.substr(Deliverable.send_after, 20, type_=String))
    result = session.execute(
        update(Deliverable)
        .where(
            Deliverable.state == DeliverableState.QUEUED,
            Deliverable.campaign_id.in_(select(Campaign.id).where(Campaign.automation_id == automation_id)),
        )
        .values(send_after=later, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def _live_automation(account_id: int) -> Any:
    return and_(
        Automation.account_id == account_id,
        Automation.active.is_(True),
        Automation.deleted_at.is_(None),
    )


def _schedule(
    session: Session, account_id: int, contacts_by_automation: dict[int, set[int]], at: datetime
) -> int:
    """Queue each automation's emails for its contacts: one INSERT ... SELECT per automation, over all
    of its contacts at once, skipping (campaign, contact) pairs that already have a deliverable."""
    if not contacts_by_automation:
        return 0
    at = aware(at)
    items = session.execute(
        select(
            AutomationItem.automation_id,
            AutomationItem.campaign_id,
            AutomationItem.delay_hours,
            and_(Campaign.deleted_at.is_(None), Campaign.halted_at.is_(None)).label("sendable"),
        )
        .join(Campaign, Campaign.id == AutomationItem.campaign_id)
        .where(AutomationItem.automation_id.in_(contacts_by_automation))
        .order_by(AutomationItem.automation_id, AutomationItem.send_order, AutomationItem.id)
    ).all()
    due_by_automation: dict[int, dict[int, datetime]] = defaultdict(dict)
    offsets: dict[int, int] = defaultdict(int)
    for automation_id, campaign_id, delay_hours, sendable in items:
        offsets[automation_id] += delay_hours
        if sendable:
            due_by_automation[automation_id][campaign_id] = at + timedelta(hours=offsets[automation_id])
    queued = 0
    for automation_id, due in due_by_automation.items():
        queued += _insert_for(session, account_id, due, contacts_by_automation[automation_id], at)
    return queued


def _insert_for(
    session: Session, account_id: int, due: dict[int, datetime], contact_ids: Collection[int], at: datetime
) -> int:
    stamps = {cid: literal(moment, UTCDateTime()) for cid, moment in due.items()}
    send_after = case(stamps, value=AutomationItem.campaign_id)
    rows = (
        select(
            literal(account_id),
            AutomationItem.campaign_id,
            Contact.id,
            literal(DeliverableState.QUEUED, String()),
            send_after,
            literal(0),
            literal(at, UTCDateTime()),
            literal(at, UTCDateTime()),
        )
        .select_from(Contact)
        .join(AutomationItem, AutomationItem.campaign_id.in_(list(due)))
        .where(
            Contact.id.in_(sorted(contact_ids)),
            Contact.account_id == account_id,
            Contact.deleted_at.is_(None),
            Contact.unsubscribed_at.is_(None),
            Contact.bounced_at.is_(None),
            not_suppressed(account_id, Contact.email_key),
        )
        .order_by(Contact.id, AutomationItem.campaign_id)
    )
    result = session.execute(
        upsert(session, Deliverable)
        .from_select(QUEUED_COLUMNS, rows)
        .on_conflict_do_nothing(index_elements=["campaign_id", "contact_id"])
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
