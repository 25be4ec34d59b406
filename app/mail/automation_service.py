"""Automations: one trigger and an ordered sequence of emails (each stored as a campaign of its own).

An automation is created inactive unless `active` is given. Its emails are numbered by send_order
from 1; moving one (PATCH /automation-emails/{id} with send_order) shifts the others to make room.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.identity.principal import Principal
from app.kit.errors import NotFound, ValidationFailed
from app.kit.time import utcnow
from app.mail.campaign_service import campaign_views
from app.mail.common import valid_id
from app.mail.stats import campaign_stats
from app.models import Automation, AutomationItem, AutomationTrigger, Campaign, ContactList, Deliverable

AUTOMATIONS_PER_PAGE = 100
DEFAULT_DELAY_HOURS = 24


def automation_views(
    session: Session, automations: list[Automation], *, with_stats: bool
) -> list[dict[str, Any]]:
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
        {
            "id": a.id,
            "user_id": a.user_id,
            "title": a.title,
            "active": a.active,
            "created_at": a.created_at,
            "updated_at": a.updated_at,
            "automation_triggers": triggers[a.id],
            "automation_items": item_views(session, items[a.id], with_stats=with_stats)
            if items[a.id]
            else [],
        }
        for a in automations
    ]


def item_views(session: Session, items: list[AutomationItem], *, with_stats: bool) -> list[dict[str, Any]]:
    campaigns = {
        c.id: c
        for c in session.scalars(select(Campaign).where(Campaign.id.in_([i.campaign_id for i in items])))
    }
    campaign_dicts = {view["id"]: view for view in campaign_views(session, list(campaigns.values()))}
    if with_stats:
        for campaign_id, stats in campaign_stats(session, list(campaigns.values())).items():
            campaign_dicts[campaign_id]["stats"] = stats
    return [
        {
            "id": i.id,
            "automation_id": i.automation_id,
            "campaign_id": i.campaign_id,
            "delay_hours": i.delay_hours,
            "send_order": i.send_order,
            "campaign": campaign_dicts[i.campaign_id],
            "created_at": i.created_at,
            "updated_at": i.updated_at,
        }
        for i in items
    ]


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
            Deliverable.state == "queued",
            Deliverable.campaign_id.in_(select(Campaign.id).where(Campaign.automation_id == automation_id)),
        )
        .values(state="cancelled", updated_at=utcnow())
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
