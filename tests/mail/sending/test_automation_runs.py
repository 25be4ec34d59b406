"""Automations at work: apply_list and open/click triggers queue the emails with their delays, the
worker sends them when they are due, pausing holds and resuming shifts them, deleting cancels them."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.kit.time import utcnow
from app.models import Automation, Campaign, ListMembership
from tests.conftest import ApiUser
from tests.factories import create_list
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list
from tests.mail.sending.emails import contact_id_of, deliverables_of, links_in, worker_at

ANN, BOB, CY = "ann@example.com", "bob@example.com", "cy@example.com"
HOUR = timedelta(hours=1)


def automation(client: TestClient, user: ApiUser, delays: list[int], **trigger: Any) -> dict[str, Any]:
    """An active automation with one email per delay; returns it with `emails`, their campaign ids."""
    body = {"title": "Series", "active": True, **trigger}
    response = client.post("/automations", json=body, headers=user.headers)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    created["emails"] = []
    for number, delay in enumerate(delays, start=1):
        email = {
            "subject": f"Step {number}",
            "html": f"<p>Step {number}</p>",
            "from_name": "Ann",
            "from_email": "ann@example.com",
            "delay_hours": delay,
        }
        added = client.post(f"/automations/{created['id']}/emails", json=email, headers=user.headers)
        assert added.status_code == 201, added.text
        created["emails"].append(added.json()["campaign_id"])
    return created


def join_time(db: Session, client: TestClient, user: ApiUser, email: str, list_id: int) -> datetime:
    contact_id = contact_id_of(client, user.headers, email)
    joined = db.scalar(
        select(ListMembership.created_at).where(
            ListMembership.contact_id == contact_id, ListMembership.list_id == list_id
        )
    )
    assert joined is not None
    return joined


def subjects_to(smtp_sink: SmtpSink, address: str) -> list[str]:
    """Subjects received by `address`, sorted: emails due together go out at once, in any order."""
    return sorted(str(received.message["Subject"]) for received in smtp_sink.to(address))


def patch_active(client: TestClient, user: ApiUser, automation_id: int, active: bool) -> None:
    response = client.patch(f"/automations/{automation_id}", json={"active": active}, headers=user.headers)
    assert response.status_code == 200, response.text
    assert response.json()["active"] is active


def test_apply_list_queues_the_emails_at_cumulative_delays_and_the_worker_sends_them_when_due(
    client: TestClient,
    api_user: ApiUser,
    db: Session,
    settings: Settings,
    session_factory: sessionmaker[Session],
    sender: Sender,
    smtp_sink: SmtpSink,
) -> None:
    list_id = create_list(client, api_user)["id"]
    series = automation(client, api_user, [0, 24, 48], trigger_type="apply_list", trigger_list_id=list_id)
    response = client.post("/contacts", json={"email": ANN, "lists": [list_id]}, headers=api_user.headers)
    assert response.status_code == 200, response.text

    joined = join_time(db, client, api_user, ANN, list_id)
    rows = deliverables_of(db, ANN)
    assert [(r.campaign_id, r.state) for r in rows] == [(c, "queued") for c in series["emails"]]
    assert [r.send_after for r in rows] == [joined, joined + 24 * HOUR, joined + 72 * HOUR]

    assert sender.drain() == 1
    assert subjects_to(smtp_sink, ANN) == ["Step 1"]
    # Nothing more is due an hour before the second email; then each goes out once its time has come.
    assert worker_at(settings, session_factory, smtp_sink, joined + 23 * HOUR).drain() == 0
    assert worker_at(settings, session_factory, smtp_sink, joined + 24 * HOUR).drain() == 1
    assert worker_at(settings, session_factory, smtp_sink, joined + 71 * HOUR).drain() == 0
    assert worker_at(settings, session_factory, smtp_sink, joined + 73 * HOUR).drain() == 1
    assert subjects_to(smtp_sink, ANN) == ["Step 1", "Step 2", "Step 3"]
    assert [r.state for r in deliverables_of(db, ANN)] == ["sent", "sent", "sent"]
    assert worker_at(settings, session_factory, smtp_sink, joined + 1000 * HOUR).drain() == 0


def test_only_new_memberships_of_subscribed_contacts_fire_and_each_email_is_queued_once(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    list_id, other_list = create_list(client, api_user)["id"], create_list(client, api_user, "Other")["id"]
    series = automation(client, api_user, [0, 24], trigger_type="apply_list", trigger_list_id=list_id)
    headers = api_user.headers
    # Cy is on the other list only and unsubscribed before joining the automation's list.
    client.post("/contacts", json={"email": CY, "lists": [other_list]}, headers=headers)
    assert client.patch("/unsubscribe", json={"email": CY}, headers=headers).status_code == 200
    client.post("/contacts", json={"email": ANN, "lists": [other_list]}, headers=headers)
    assert deliverables_of(db, ANN) == []

    # The batch path: Ann and Bob join (Bob is new), Cy joins but is unsubscribed.
    batch = {"contacts": [{"email": e, "lists": [list_id]} for e in (ANN, BOB, CY)]}
    response = client.post("/contacts/batch", json=batch, headers=headers)
    assert response.status_code == 200, response.text
    assert [r.campaign_id for r in deliverables_of(db, ANN)] == series["emails"]
    assert [r.campaign_id for r in deliverables_of(db, BOB)] == series["emails"]
    assert deliverables_of(db, CY) == []
    ann_rows = deliverables_of(db, ANN)
    joined = join_time(db, client, api_user, ANN, list_id)

    # Naming the list again (batch, POST, PATCH with the same lists) is no new membership.
    client.post("/contacts/batch", json=batch, headers=headers)
    client.post("/contacts", json={"email": ANN, "lists": [list_id]}, headers=headers)
    ann_id = contact_id_of(client, headers, ANN)
    response = client.patch(f"/contacts/{ann_id}", json={"lists": [list_id, other_list]}, headers=headers)
    assert response.status_code == 200, response.text
    assert deliverables_of(db, ANN) == ann_rows
    assert join_time(db, client, api_user, ANN, list_id) == joined  # a kept membership keeps its time

    # Leaving and rejoining is a new membership, but each email goes to a contact at most once.
    client.patch(f"/contacts/{ann_id}", json={"lists": [other_list]}, headers=headers)
    client.patch(f"/contacts/{ann_id}", json={"lists": [list_id]}, headers=headers)
    assert join_time(db, client, api_user, ANN, list_id) > joined
    assert deliverables_of(db, ANN) == ann_rows


def test_patch_contact_adding_the_list_fires(client: TestClient, api_user: ApiUser, db: Session) -> None:
    list_id = create_list(client, api_user)["id"]
    series = automation(client, api_user, [2], trigger_type="apply_list", trigger_list_id=list_id)
    client.post("/contacts", json={"email": ANN}, headers=api_user.headers)
    ann_id = contact_id_of(client, api_user.headers, ANN)
    response = client.patch(f"/contacts/{ann_id}", json={"lists": [list_id]}, headers=api_user.headers)
    assert response.status_code == 200, response.text
    rows = deliverables_of(db, ANN)
    assert [r.campaign_id for r in rows] == series["emails"]
    assert rows[0].send_after == join_time(db, client, api_user, ANN, list_id) + 2 * HOUR


def test_inactive_deleted_and_other_list_automations_do_not_fire(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    list_id, other_list = create_list(client, api_user)["id"], create_list(client, api_user, "Other")["id"]
    off = automation(client, api_user, [0], trigger_type="apply_list", trigger_list_id=list_id)
    patch_active(client, api_user, off["id"], False)
    gone = automation(client, api_user, [0], trigger_type="apply_list", trigger_list_id=list_id)
    assert client.delete(f"/automations/{gone['id']}", headers=api_user.headers).status_code == 200
    automation(client, api_user, [0], trigger_type="apply_list", trigger_list_id=other_list)
    client.post("/contacts", json={"email": ANN, "lists": [list_id]}, headers=api_user.headers)
    assert deliverables_of(db, ANN) == []


def test_open_campaign_trigger_fires_on_the_first_open_only(
    client: TestClient,
    api_user: ApiUser,
    db: Session,
    settings: Settings,
    session_factory: sessionmaker[Session],
    sender: Sender,
    smtp_sink: SmtpSink,
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, [ANN, BOB])
    series = automation(
        client, api_user, [1, 3], trigger_type="open_campaign", trigger_campaign_id=campaign_id
    )
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    assert sender.drain() == 2
    links = links_in(smtp_sink.to(ANN)[0])

    assert client.get(links.pixel).status_code == 200
    opened_at = deliverables_of(db, ANN)[0].opened_at
    rows = deliverables_of(db, ANN)[1:]
    assert [(r.campaign_id, r.state) for r in rows] == [(c, "queued") for c in series["emails"]]
    assert [r.send_after for r in rows] == [opened_at + HOUR, opened_at + 4 * HOUR]
    assert len(deliverables_of(db, BOB)) == 1  # Bob opened nothing

    client.get(links.pixel)
    client.get(links.clicks[0], follow_redirects=False)
    assert deliverables_of(db, ANN)[1:] == rows
    assert worker_at(settings, session_factory, smtp_sink, opened_at + 5 * HOUR).drain() == 2
    assert subjects_to(smtp_sink, ANN) == ["Hello friend", "Step 1", "Step 2"]


def test_click_campaign_trigger_fires_on_the_first_click_and_the_click_also_fires_opens(
    client: TestClient, api_user: ApiUser, db: Session, sender: Sender, smtp_sink: SmtpSink
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, [ANN])
    on_click = automation(
        client, api_user, [0], trigger_type="click_campaign", trigger_campaign_id=campaign_id
    )
    on_open = automation(client, api_user, [5], trigger_type="open_campaign", trigger_campaign_id=campaign_id)
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    assert sender.drain() == 1
    links = links_in(smtp_sink.to(ANN)[0])

    assert client.get(links.clicks[0], follow_redirects=False).status_code == 302
    first, *queued = deliverables_of(db, ANN)
    assert first.clicked_at is not None
    due = {r.campaign_id: r.send_after for r in queued}
    assert due == {on_click["emails"][0]: first.clicked_at, on_open["emails"][0]: first.clicked_at + 5 * HOUR}
    client.get(links.clicks[0], follow_redirects=False)
    assert len(deliverables_of(db, ANN)) == 3


def test_pause_holds_the_queued_emails_and_resume_moves_them_by_the_pause(
    client: TestClient,
    api_user: ApiUser,
    db: Session,
    settings: Settings,
    session_factory: sessionmaker[Session],
    smtp_sink: SmtpSink,
) -> None:
    list_id = create_list(client, api_user)["id"]
    series = automation(client, api_user, [1, 24], trigger_type="apply_list", trigger_list_id=list_id)
    client.post("/contacts", json={"email": ANN, "lists": [list_id]}, headers=api_user.headers)
    before = [r.send_after for r in deliverables_of(db, ANN)]

    patch_active(client, api_user, series["id"], False)
    paused_at = db.scalar(select(Automation.paused_at).where(Automation.id == series["id"]))
    assert paused_at is not None
    # While it is off nothing of it goes out, however late it is.
    assert worker_at(settings, session_factory, smtp_sink, utcnow() + 1000 * HOUR).drain() == 0
    assert [r.state for r in deliverables_of(db, ANN)] == ["queued", "queued"]

    # Pretend the pause began three hours ago.
    db.execute(update(Automation).where(Automation.id == series["id"]).values(paused_at=paused_at - 3 * HOUR))
    db.commit()
    patch_active(client, api_user, series["id"], True)
    resumed = utcnow()
    assert db.scalar(select(Automation.paused_at).where(Automation.id == series["id"])) is None
    after = [r.send_after for r in deliverables_of(db, ANN)]
    shift = after[0] - before[0]
    assert 3 * HOUR <= shift <= resumed - (paused_at - 3 * HOUR)
    assert after[1] - before[1] == shift  # the spacing between the emails is kept
    assert after[1] - after[0] == 24 * HOUR

    assert worker_at(settings, session_factory, smtp_sink, after[0] - timedelta(seconds=1)).drain() == 0
    assert worker_at(settings, session_factory, smtp_sink, after[0]).drain() == 1
    assert subjects_to(smtp_sink, ANN) == ["Step 1"]


def test_switching_on_an_automation_that_was_never_paused_moves_nothing(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    list_id = create_list(client, api_user)["id"]
    series = automation(client, api_user, [1], trigger_type="apply_list", trigger_list_id=list_id)
    client.post("/contacts", json={"email": ANN, "lists": [list_id]}, headers=api_user.headers)
    before = deliverables_of(db, ANN)
    patch_active(client, api_user, series["id"], True)  # already on
    assert deliverables_of(db, ANN) == before


def test_deleting_the_automation_cancels_its_queued_emails(
    client: TestClient,
    api_user: ApiUser,
    db: Session,
    settings: Settings,
    session_factory: sessionmaker[Session],
    sender: Sender,
    smtp_sink: SmtpSink,
) -> None:
    list_id = create_list(client, api_user)["id"]
    series = automation(client, api_user, [0, 24], trigger_type="apply_list", trigger_list_id=list_id)
    client.post("/contacts", json={"email": ANN, "lists": [list_id]}, headers=api_user.headers)
    assert sender.drain() == 1
    assert client.delete(f"/automations/{series['id']}", headers=api_user.headers).status_code == 200
    assert [r.state for r in deliverables_of(db, ANN)] == ["sent", "cancelled"]
    assert worker_at(settings, session_factory, smtp_sink, utcnow() + 1000 * HOUR).drain() == 0
    assert db.scalar(select(Campaign.deleted_at).where(Campaign.id == series["emails"][0])) is not None


def test_deleting_or_unsubscribing_the_contact_cancels_its_queued_emails(
    client: TestClient,
    api_user: ApiUser,
    db: Session,
    settings: Settings,
    session_factory: sessionmaker[Session],
    smtp_sink: SmtpSink,
) -> None:
    list_id = create_list(client, api_user)["id"]
    automation(client, api_user, [1, 24], trigger_type="apply_list", trigger_list_id=list_id)
    for email in (ANN, BOB):
        client.post("/contacts", json={"email": email, "lists": [list_id]}, headers=api_user.headers)
    ann_id = contact_id_of(client, api_user.headers, ANN)
    assert client.delete(f"/contacts/{ann_id}", headers=api_user.headers).status_code == 200
    assert client.patch("/unsubscribe", json={"email": BOB}, headers=api_user.headers).status_code == 200
    assert [r.state for r in deliverables_of(db, ANN)] == ["cancelled", "cancelled"]
    assert [r.state for r in deliverables_of(db, BOB)] == ["cancelled", "cancelled"]
    assert worker_at(settings, session_factory, smtp_sink, utcnow() + 1000 * HOUR).drain() == 0

    # Ann comes back and joins again: the emails she was once queued are not queued a second time.
    client.post("/contacts", json={"email": ANN, "lists": [list_id]}, headers=api_user.headers)
    assert [r.state for r in deliverables_of(db, ANN)] == ["cancelled", "cancelled"]


def test_a_halted_automation_email_is_skipped_and_the_next_keeps_its_time(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    list_id = create_list(client, api_user)["id"]
    series = automation(client, api_user, [1, 2], trigger_type="apply_list", trigger_list_id=list_id)
    db.execute(update(Campaign).where(Campaign.id == series["emails"][0]).values(halted_at=utcnow()))
    db.commit()
    client.post("/contacts", json={"email": ANN, "lists": [list_id]}, headers=api_user.headers)
    rows = deliverables_of(db, ANN)
    assert [r.campaign_id for r in rows] == [series["emails"][1]]
    assert rows[0].send_after == join_time(db, client, api_user, ANN, list_id) + 3 * HOUR
