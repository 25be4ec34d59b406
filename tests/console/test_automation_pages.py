"""The console's Automations in-process: one made with a list trigger through the email API's service
(its refusals shown), emails added and edited (their delays and order), turned on and off, and who is in
it once a contact joins the list; another account's automation is not found."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.identity.principal import principal_of
from app.mail import contact_service, list_service
from app.models import Account, Automation, AutomationItem, User
from tests.authroutes.conftest import Person

EMAIL = {"from_name": "Ann", "from_email": "ann@example.com", "html": "<p>Hi</p>"}


def test_make_fill_switch_and_watch_an_automation(
    console: TestClient, db: Session, person: Person, make_person: Callable[..., Person]
) -> None:
    assert "You have no automations." in console.get("/console/automations").text
    welcome = list_service.add_list(db, person.account_id, person.user_id, "Welcome").id
    refused = console.post(
        "/console/automations", data={"title": "Drip", "trigger_type": "apply_list", "trigger_list_id": "999"}
    )
    assert refused.status_code == 422 and "trigger_list_id" in refused.text
    made = console.post(
        "/console/automations",
        data={"title": "Drip", "trigger_type": "apply_list", "trigger_list_id": str(welcome)},
    )
    assert made.status_code == 303, made.text
    path = made.headers["location"]
    automation = db.scalars(select(Automation).where(Automation.account_id == person.account_id)).one()
    assert path == f"/console/automations/{automation.id}"
    page = console.get(path).text
    assert "A contact joins a list (Welcome)" in page and "No emails yet." in page and "Off." in page

    bad = console.post(f"{path}/emails", data={**EMAIL, "subject": "One", "delay_hours": "9999"})
    assert bad.status_code == 422 and "delay_hours" in bad.text and 'value="One"' in bad.text
    assert console.post(f"{path}/emails", data={**EMAIL, "subject": "One"}).status_code == 303
    assert (
        console.post(f"{path}/emails", data={**EMAIL, "subject": "Two", "delay_hours": "48"}).status_code
        == 303
    )
    items = db.scalars(select(AutomationItem).where(AutomationItem.automation_id == automation.id)).all()
    assert sorted((i.send_order, i.delay_hours) for i in items) == [(1, 0), (2, 48)]
    second = next(i for i in items if i.send_order == 2)
    edit = console.get(f"/console/automations/emails/{second.id}")
    assert edit.status_code == 200 and "Email 2 of Drip" in edit.text
    moved = console.post(
        f"/console/automations/emails/{second.id}",
        data={**EMAIL, "subject": "Two, first", "delay_hours": "0", "send_order": "1"},
    )
    assert moved.status_code == 303
    db.expire_all()
    assert db.get_one(AutomationItem, second.id).send_order == 1

    assert console.post(f"{path}/active", data={"active": "true"}).status_code == 303
    db.expire_all()
    assert db.get_one(Automation, automation.id).active
    principal = principal_of(db.get_one(User, person.user_id), db.get_one(Account, person.account_id))
    joiner = contact_service.ContactWrite("joiner@example.com", lists=[welcome])
    contact_service.upsert_contacts(db, principal, [joiner], validation_status=422)
    db.flush()
    watched = console.get(path).text
    assert "1 contact." in watched and "joiner@example.com" in watched
    row = watched.split("joiner@example.com</a></td>", 1)[1].split("</tr>", 1)[0]
    assert row.startswith("<td>0</td><td>2</td>")
    assert console.post(f"{path}/active", data={"active": "false"}).status_code == 303
    db.expire_all()
    assert not db.get_one(Automation, automation.id).active

    stranger = make_person("stranger")
    theirs = Automation(account_id=stranger.account_id, user_id=stranger.user_id, title="Theirs")
    db.add(theirs)
    db.flush()
    assert console.get(f"/console/automations/{theirs.id}").status_code == 404
    assert (
        console.post(f"/console/automations/{theirs.id}/active", data={"active": "true"}).status_code == 404
    )
    assert console.get(f"/console/automations/emails/{second.id + 1000}").status_code == 404
