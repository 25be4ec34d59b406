"""The states are stored as their plain values and read back as enum members (app/models/states.py)."""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.kit.wire_enum import inline_enum
from app.models import Deliverable, DeliverableState, RunState
from tests.conftest import ApiUser
from tests.factories import add_campaign, add_contacts, add_deliverable


def test_a_state_is_stored_as_its_value_and_read_back_as_the_member(db: Session, api_user: ApiUser) -> None:
    campaign = add_campaign(db, api_user.account_id)
    [contact] = add_contacts(db, api_user.account_id, 1)
    deliverable_id = add_deliverable(db, api_user.account_id, campaign, contact)
    raw = text("SELECT state FROM deliverables WHERE id = :id")
    stored = db.execute(raw, {"id": deliverable_id}).scalar()
    assert stored == "queued" and type(stored) is str
    db.expire_all()
    state = db.scalar(select(Deliverable.state).where(Deliverable.id == deliverable_id))
    assert state is DeliverableState.QUEUED
    assert db.scalar(select(Deliverable.id).where(Deliverable.state == "queued")) == deliverable_id


def test_a_wire_enum_is_a_literal_of_the_members() -> None:
    assert inline_enum(RunState).__args__ == tuple(RunState)
