"""Automations: one trigger and an ordered sequence of emails (each stored as a campaign of its own).

An automation is created inactive unless `active` is given. Its emails are numbered by send_order
from 1; moving one (PATCH /automation-emails/{id} with send_order) shifts the others to make room.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, case, func, select, update
from sqlalchemy.orm import Session

from app.identity.principal import Principal
from app.kit.errors import NotFound, ValidationFailed
from app.kit.pagination import Paging
from app.kit.time import utcnow
from app.mail.automations.automation_runs import set_active
from app.mail.campaigns.campaign_rules import set_email_parts
from app.mail.campaigns.campaign_service import campaigns_wire
from app.mail.common import owned, paginate, valid_id
from app.mail.specs import AutomationCreate, AutomationEmailCreate, AutomationEmailUpdate, AutomationUpdate
from app.mail.stats import campaign_stats
from app.mail.wire import (
    AutomationCampaignOut,
    AutomationItemOut,
    AutomationOut,
    AutomationTriggerOut,
    Page,
    row_wire,
)
from app.models import (
    Automation,
    AutomationItem,
    AutomationTrigger,
    Campaign,
    Contact,
    ContactList,
    Deliverable,
    DeliverableState,
)

AUTOMATIONS_PER_PAGE = 100
DEFAULT_DELAY_HOURS = 24


def automations_wire(
    session: Session, automations: list[Automation], *, with_stats: bool
) -> list[AutomationOut]:
    """Automations with triggers and items (each with its campaign), in a fixed number of queries."""
    ids = [a.id for a in automations]
    triggers: dict[int, list[AutomationTrigger]] = defaultdict(list)
    items: dict[int, list[AutomationItem]] = defaultdict(list)
    if ids:
        for trigger in session.scalars(
            select(AutomationTrigger)
            .where(AutomationTrigger.automation_id.in_(ids))
            .order_by(AutomationTrigger.id)
        ):
            triggers[trigger.automation_id].append(trigger)
        for item in session.scalars(
            select(AutomationItem)
            .where(AutomationItem.automation_id.in_(ids))
            .order_by(AutomationItem.send_order, AutomationItem.id)
        ):
            items[item.automation_id].append(item)
    return [
        row_wire(
            AutomationOut,
            a,
            automation_triggers=[AutomationTriggerOut.model_validate(t) for t in triggers[a.id]],
            automation_items=items_wire(session, items[a.id], with_stats=with_stats) if items[a.id] else [],
        )
        for a in automations
    ]


def items_wire(session: Session, items: list[AutomationItem], *, with_stats: bool) -> list[AutomationItemOut]:
    campaigns = list(session.scalars(select(Campaign).where(Campaign.id.in_([i.campaign_id for i in items]))))
    stats = campaign_stats(session, campaigns) if with_stats else {}
    emails = {
        view.id: AutomationCampaignOut(**dict(view), stats=stats.get(view.id))
        for view in campaigns_wire(session, campaigns)
    }
    return [row_wire(AutomationItemOut, i, campaign=emails[i.campaign_id]) for i in items]


def resolve_trigger(
    session: Session,
    principal: Principal,
    trigger_type: str | None,
    list_id: int | None,
    campaign_id: int | None,
) -> tuple[str, int | None, int | None] | None:
    """Check a trigger's target: apply_list needs a live list, open and click a live campaign (422)."""
    if trigger_type is None:
        if list_id is not None or campaign_id is not None:
            raise ValidationFailed(
                {"trigger_type": ["The trigger type field is required with a trigger target."]}
            )
        return None
    account_id = principal.account.id
    if trigger_type == "apply_list":
        if list_id is None:
            raise ValidationFailed(
                {
                    "trigger_list_id": [
                        "The trigger list id field is required when trigger type is apply_list."
                    ]
                }
            )
        found = session.get(ContactList, list_id) if valid_id(list_id) else None
        if found is None or found.account_id != account_id or found.deleted_at is not None:
            raise ValidationFailed({"trigger_list_id": ["The selected trigger list id is invalid."]})
        return trigger_type, list_id, None
    if campaign_id is None:
        raise ValidationFailed(
            {
                "trigger_campaign_id": [
                    f"The trigger campaign id field is required when trigger type is {trigger_type}."
                ]
            }
        )
    campaign = session.get(Campaign, campaign_id) if valid_id(campaign_id) else None
    if campaign is None or campaign.account_id != account_id or campaign.deleted_at is not None:
        raise ValidationFailed({"trigger_campaign_id": ["The selected trigger campaign id is invalid."]})
    return trigger_type, None, campaign_id


def replace_trigger(
    session: Session, automation: Automation, trigger: tuple[str, int | None, int | None]
) -> None:
    for existing in session.scalars(
        select(AutomationTrigger).where(AutomationTrigger.automation_id == automation.id)
    ):
        session.delete(existing)
    session.flush()
    trigger_type, list_id, campaign_id = trigger
    session.add(
        AutomationTrigger(
            automation_id=automation.id, type=trigger_type, list_id=list_id, campaign_id=campaign_id
        )
    )


def cancel_automation_sends(session: Session, automation_id: int) -> None:
    session.execute(
        update(Deliverable)
        .where(
            Deliverable.state == DeliverableState.QUEUED,
            Deliverable.campaign_id.in_(select(Campaign.id).where(Campaign.automation_id == automation_id)),
        )
        .values(state=DeliverableState.CANCELLED, updated_at=utcnow())
    )


def renumber(
    session: Session, automation_id: int, moved: AutomationItem | None = None, position: int = 0
) -> None:
    """Number the automation's items 1..n; `moved` goes to `position` (1-based, clamped) first."""
    items = list(
        session.scalars(
            select(AutomationItem)
            .where(AutomationItem.automation_id == automation_id)
            .order_by(AutomationItem.send_order, AutomationItem.id)
        )
    )
    if moved is not None:
        items = [i for i in items if i.id != moved.id]
        items.insert(min(max(position, 1), len(items) + 1) - 1, moved)
    now = utcnow()
    for order, item in enumerate(items, start=1):
        if item.send_order != order:
            item.send_order = order
            item.updated_at = now


def owned_item(session: Session, item_id: int, principal: Principal) -> tuple[AutomationItem, Automation]:
    item = session.get(AutomationItem, item_id)
    automation = session.get(Automation, item.automation_id) if item else None
    if (
        item is None
        or automation is None
        or automation.account_id != principal.account.id
        or automation.deleted_at is not None
    ):
        raise NotFound("Automation email not found.")
    return item, automation


def live_automations(account_id: int) -> Select[Automation]:
    return select(Automation).where(Automation.account_id == account_id, Automation.deleted_at.is_(None))


def account_automations(session: Session, account_id: int) -> list[AutomationOut]:
    """Every live automation of the account, oldest first, as GET /automations lists them."""
    automations = session.scalars(live_automations(account_id).order_by(Automation.id))
    return automations_wire(session, list(automations), with_stats=False)


def automations_page(paging: Paging, session: Session, principal: Principal) -> Page[AutomationOut]:
    """GET /automations: a page of the account's live automations."""
    query = live_automations(principal.account.id).order_by(Automation.id)
    paged = paginate(session, paging, query, AUTOMATIONS_PER_PAGE)
    return paged.as_page(automations_wire(session, paged.rows, with_stats=False))


def create_automation(session: Session, principal: Principal, body: AutomationCreate) -> AutomationOut:
    """POST /automations: inactive unless `active` is given, with its trigger when one is given."""
    trigger = resolve_trigger(
        session, principal, body.trigger_type, body.trigger_list_id, body.trigger_campaign_id
    )
    automation = Automation(
        account_id=principal.account.id, user_id=principal.user.id, title=body.title, active=body.active
    )
    session.add(automation)
    session.flush()
    if trigger is not None:
        replace_trigger(session, automation, trigger)
        session.flush()
    return automations_wire(session, [automation], with_stats=False)[0]


def update_automation(
    session: Session, principal: Principal, automation: Automation, body: AutomationUpdate
) -> AutomationOut:
    """PATCH /automations/{id}: title, active, and the trigger merged from the given fields and the
    current trigger (see merged_trigger)."""
    given = body.model_fields_set
    if "title" in given:
        if body.title is None:
            raise ValidationFailed({"title": ["The title field is required."]})
        automation.title = body.title
    if body.active is not None:
        set_active(session, automation, body.active, utcnow())
    if given & {"trigger_type", "trigger_list_id", "trigger_campaign_id"}:
        trigger = merged_trigger(session, principal, automation, body)
        if trigger is not None:
            replace_trigger(session, automation, trigger)
    automation.updated_at = utcnow()
    session.flush()
    return automations_wire(session, [automation], with_stats=False)[0]


def delete_automation(session: Session, automation: Automation) -> None:
    """Soft delete of the automation and its emails; what it has scheduled is cancelled."""
    now = utcnow()
    automation.deleted_at = now
    cancel_automation_sends(session, automation.id)
    session.execute(
        update(Campaign)
        .where(Campaign.automation_id == automation.id, Campaign.deleted_at.is_(None))
        .values(deleted_at=now)
    )
    session.flush()


def add_automation_email(
    session: Session, principal: Principal, automation: Automation, body: AutomationEmailCreate
) -> AutomationItemOut:
    """POST /automations/{id}/emails: the email goes last; its delay is 0 for the first email and
    DEFAULT_DELAY_HOURS after another unless given."""
    last_order = session.scalar(
        select(func.max(AutomationItem.send_order)).where(AutomationItem.automation_id == automation.id)
    )
    delay = (
        body.delay_hours
        if body.delay_hours is not None
        else (0 if last_order is None else DEFAULT_DELAY_HOURS)
    )
    campaign = Campaign(
        account_id=principal.account.id,
        automation_id=automation.id,
        title=body.subject,
        subject=body.subject,
        html=body.html,
        from_name=body.from_name,
        from_email=body.from_email,
        timezone=principal.account.timezone or None,
    )
    set_email_parts(campaign, body)
    session.add(campaign)
    session.flush()
    item = AutomationItem(
        automation_id=automation.id,
        campaign_id=campaign.id,
        delay_hours=delay,
        send_order=(last_order or 0) + 1,
    )
    session.add(item)
    session.flush()
    return items_wire(session, [item], with_stats=False)[0]


def update_automation_email(
    session: Session, automation: Automation, item: AutomationItem, body: AutomationEmailUpdate
) -> AutomationItemOut:
    """PATCH /automation-emails/{id}: the email's fields, its delay, and its place in the sequence."""
    given = body.model_fields_set
    nulled = [
        n for n in ("subject", "html", "from_name", "from_email") if n in given and getattr(body, n) is None
    ]
    if nulled:
        raise ValidationFailed({n: [f"The {n.replace('_', ' ')} field is required."] for n in nulled})
    campaign = session.get_one(Campaign, item.campaign_id)
    now = utcnow()
    for name in ("subject", "html", "from_name", "from_email"):
        if name in given:
            setattr(campaign, name, getattr(body, name))
            campaign.updated_at = now
    if set_email_parts(campaign, body):
        campaign.updated_at = now
    if body.subject is not None:
        campaign.title = body.subject
    if body.delay_hours is not None:
        item.delay_hours = body.delay_hours
    if body.send_order is not None:
        renumber(session, automation.id, moved=item, position=body.send_order)
    item.updated_at = now
    session.flush()
    return items_wire(session, [item], with_stats=False)[0]


def find_automation(session: Session, principal: Principal, automation_id: int) -> Automation:
    return owned(session, Automation, automation_id, principal.account.id, "Automation not found.")


def merged_trigger(
    session: Session, principal: Principal, automation: Automation, body: AutomationUpdate
) -> tuple[str, int | None, int | None] | None:
    """The trigger a PATCH asks for: the given fields over the current trigger's. A list or campaign
    id is kept from the current trigger only while the type stays the same."""
    given = body.model_fields_set
    current = session.scalars(
        select(AutomationTrigger).where(AutomationTrigger.automation_id == automation.id)
    ).first()
    trigger_type = body.trigger_type or (current.type if current else None)
    same_type = current is not None and current.type == trigger_type
    list_id = (
        body.trigger_list_id
        if "trigger_list_id" in given
        else (current.list_id if same_type and current else None)
    )
    campaign_id = (
        body.trigger_campaign_id
        if "trigger_campaign_id" in given
        else (current.campaign_id if same_type and current else None)
    )
    return resolve_trigger(session, principal, trigger_type, list_id, campaign_id)


# The people an automation page lists (the newest first).
MEMBERS_SHOWN = 100


@dataclass(frozen=True)
class AutomationMember:
    """A contact the automation has emails for: how many were sent, how many wait, the next one's time."""

    id: int
    email: str
    sent: int
    waiting: int
    next_due: datetime | None


def automation_members(session: Session, automation: Automation) -> tuple[int, list[AutomationMember]]:
    """Who is in the automation: the contacts it has emails for (sent, queued or otherwise; cancelled
    ones aside), how many in all, and the latest MEMBERS_SHOWN with their sent and waiting counts and
    when the next is due."""
    emails = select(Campaign.id).where(Campaign.automation_id == automation.id)
    rows = (
        select(
            Deliverable.contact_id,
            func.count(Deliverable.sent_at).label("sent"),
            func.count(case((Deliverable.state == DeliverableState.QUEUED, 1))).label("waiting"),
            func.min(case((Deliverable.state == DeliverableState.QUEUED, Deliverable.send_after))).label(
                "next_due"
            ),
            func.min(Deliverable.id).label("first"),
        )
        .where(Deliverable.campaign_id.in_(emails), Deliverable.state != DeliverableState.CANCELLED)
        .group_by(Deliverable.contact_id)
    ).subquery()
    total = session.scalar(select(func.count()).select_from(rows)) or 0
    latest = session.execute(
        select(Contact.id, Contact.email, rows.c.sent, rows.c.waiting, rows.c.next_due)
        .join(rows, rows.c.contact_id == Contact.id)
        .order_by(rows.c.first.desc())
        .limit(MEMBERS_SHOWN)
    ).all()
    return total, [AutomationMember(r.id, r.email, r.sent, r.waiting, r.next_due) for r in latest]
