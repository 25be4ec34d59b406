"""Relays that push back (pace.py) and several relays (transport.py's RelayRouter): throttle replies
defer email without failing it, the throttled relay or receiving domain backs off (AIMD) while others go
on, a relay's cap, weights, relays per sending domain, failover, and the relays' /metrics."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY, generate_latest
from sqlalchemy import Engine, delete, func, insert, select
from sqlalchemy.orm import Session

from app.identity.accounts import create_user
from app.kit.time import utcnow
from app.mail.sending.pace import Pace, is_throttle
from app.mail.sending.transport import (
    Deferred,
    RelayRouter,
    SmtpTransport,
    TemporaryFailure,
    make_transport,
    parse_relays,
)
from app.models import Account, Campaign, CampaignList, Contact, ContactList, Deliverable, ListMembership
from tests.loops import Run
from tests.processes import free_port, shipped_worker
from tests.smtp_sink import SmtpSink, running_sink

MESSAGE = b"Subject: hi\r\n\r\nhello\r\n"


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    with running_sink() as receiver:
        yield receiver


@pytest.mark.parametrize(
    ("code", "text", "throttle"),
    [
        (454, "Throttling failure: Maximum sending rate exceeded.", True),  # Amazon SES
        (421, "4.7.28 Our system has detected an unusual rate of unsolicited mail", True),  # Gmail
        (451, "4.7.500 Server busy. Please try again later from [192.0.2.7]. (S77714)", True),  # Microsoft
        (450, "4.2.1 The user you are trying to contact is receiving mail too quickly", False),
        (452, "4.5.3 Too many messages in this connection, slow down", True),
        (451, "4.7.1 Greylisted, see https://postgrey.schweikert.ch/", False),
        (451, "4.3.0 Temporary lookup failure", False),
        (550, "5.7.26 Unauthenticated email is not accepted", False),
    ],
)
def test_throttle_replies_are_told_from_other_refusals(code: int, text: str, throttle: bool) -> None:
    assert is_throttle(code, text) is throttle


def test_a_pace_halves_what_was_accepted_pauses_a_window_and_grows_back() -> None:
    pace = Pace(None, window=60)
    assert not pace.limiting
    for n in range(60):  # a burst of 60 in the first second
        pace.took(n / 60)
    pace.throttled(1.0, started=0.99)
    assert pace.rate == pytest.approx(0.5)  # 60 a minute accepted: half of it
    assert pace.paused_until == 61.0
    assert pace.slot(2.0) == 61.0
    # Replies to emails already on their way do not halve again: one episode.
    pace.throttled(1.1, started=0.995)
    assert pace.rate == pytest.approx(0.5)
    # Deferred emails get moments of their own, one interval (2 s) apart, after the pause.
    assert [pace.defer(2.0) for _ in range(3)] == [61.1, 63.1, 65.1]
    pace.took(61.2)
    assert pace.rate == pytest.approx(0.505)  # a hundredth of the halved rate a success


def test_a_cap_spaces_emails_and_growth_stops_at_it() -> None:
    pace = Pace(10.0, window=60)
    assert pace.limiting
    pace.take(pace.slot(0.0))
    assert pace.slot(0.0) == pytest.approx(0.1)
    for n in range(100):
        pace.took(n / 10)
    pace.throttled(10.0, started=10.0)
    assert pace.rate == pytest.approx(5 / 6)  # 100 over the last minute: 100/60, halved
    for n in range(2000):
        pace.took(100 + n)
    assert pace.rate == 10.0 and pace.growth == 0.0


def test_relay_urls_take_weights_domains_rates_and_passthrough() -> None:
    first, second = parse_relays(
        "smtp://u:p@a.example:587?starttls=1&weight=3&rate=14, smtps://b.example?domains=News.example.com,x.org"
    )
    assert (first.hostname, first.weight, first.rate, first.domains) == ("a.example", 3.0, 14.0, ())
    assert (second.port, second.domains, second.passthrough) == (465, ("news.example.com", "x.org"), False)
    assert parse_relays("smtp://c.example?passthrough=1")[0].passthrough
    with pytest.raises(ValueError, match="relay 2: its weight is not a positive number"):
        parse_relays("smtp://a.example smtp://b.example?weight=0")


def test_a_throttled_receiving_domain_is_deferred_while_others_go_on(sink: SmtpSink, run: Run[Any]) -> None:
    sink.throttle_domain, sink.throttle_limit = "slow.example", 3
    transport = SmtpTransport(f"{sink.url}?passthrough=1", size=2)

    async def go() -> list[BaseException | None]:
        outcomes: list[BaseException | None] = []
        try:
            for n in range(8):
                for domain in ("slow.example", "fast.example"):
                    try:
                        await transport.send("news@example.com", f"r{n}@{domain}", MESSAGE)
                        outcomes.append(None)
                    except TemporaryFailure as exc:
                        outcomes.append(exc)
        finally:
            await transport.close()
        return outcomes

    outcomes = run(go())
    fast, slow = outcomes[1::2], outcomes[0::2]
    assert fast == [None] * 8
    assert slow[:3] == [None] * 3
    assert all(isinstance(o, Deferred) and o.delay >= 50 for o in slow[3:])
    assert len(sink.throttle_refused) == 1  # then the domain waits: no second refusal
    throttled = transport.domain_paces["slow.example"]
    assert throttled.throttles == 1 and throttled.deferred == 5
    assert not transport.pace.limiting  # the relay itself is not slowed
    metrics = generate_latest(REGISTRY).decode()
    assert (
        f'tidings_relay_throttles_total{{domain="slow.example",relay="{transport.relay.name}"}} 1.0'
        in metrics
    )
    assert f'tidings_relay_emails_total{{relay="{transport.relay.name}"}} 11.0' in metrics


def test_a_throttle_from_the_relay_itself_slows_the_relay(sink: SmtpSink, run: Run[Any]) -> None:
    sink.refuse["late@example.com"] = "454 Throttling failure: Maximum sending rate exceeded."
    transport = SmtpTransport(sink.url, size=1)

    async def go() -> tuple[BaseException, BaseException]:
        try:
            await transport.send("news@example.com", "a@example.com", MESSAGE)
            with pytest.raises(Deferred) as throttled:
                await transport.send("news@example.com", "late@example.com", MESSAGE)
            with pytest.raises(Deferred) as paced:
                await transport.send("news@example.com", "b@other.example", MESSAGE)
            return throttled.value, paced.value
        finally:
            await transport.close()

    throttled, paced = run(go())
    assert "454 Throttling failure" in str(throttled)
    assert "at its pace" in str(paced)
    assert [r.recipients for r in sink.received] == [["a@example.com"]]


def test_a_relays_cap_spaces_its_emails(sink: SmtpSink, run: Run[Any]) -> None:
    transport = SmtpTransport(f"{sink.url}?rate=20", size=4)

    async def go() -> float:
        start = time.monotonic()
        try:
            await asyncio.gather(
                *(transport.send("news@example.com", f"r{n}@example.com", MESSAGE) for n in range(10))
            )
        finally:
            await transport.close()
        return time.monotonic() - start

    took = run(go())
    assert len(sink.received) == 10
    assert took >= 9 / 20 - 0.05  # nine intervals of 50 ms after the first


def test_relays_by_weight_by_sending_domain_and_failover(run: Run[Any]) -> None:
    closed = free_port()  # nothing listens there: the connection is refused
    with running_sink() as heavy, running_sink() as light, running_sink() as own:
        transport = make_transport(
            f"{heavy.url}?weight=3 {light.url}?weight=1, {own.url}?domains=own.example "
            f"smtp://127.0.0.1:{closed}?domains=own.example&weight=100",
            Path("unused"),
            2,
        )
        assert isinstance(transport, RelayRouter)

        async def go() -> None:
            try:
                for n in range(200):
                    await transport.send("a@example.com", f"r{n}@example.net", MESSAGE, "example.com")
                for n in range(5):
                    await transport.send("a@own.example", f"o{n}@example.net", MESSAGE, "own.example")
            finally:
                await transport.close()

        run(go())
        assert 110 <= len(heavy.received) <= 190 and len(heavy.received) + len(light.received) == 200
        # The heavy relay of own.example refuses connections: its email goes to the other one at once.
        assert len(own.received) == 5
        assert {tuple(r.recipients) for r in own.received} == {(f"o{n}@example.net",) for n in range(5)}
        metrics = generate_latest(REGISTRY).decode()
        assert f'tidings_relay_errors_total{{kind="connect",relay="127.0.0.1:{closed}"}}' in metrics


def test_a_worker_defers_throttled_email_and_delivers_all_of_it(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    """A real `tidings worker` against a receiver that takes 4 emails of slow.example in 3 seconds: no
    email fails, every one is delivered once, the throttled domain settles within two throttle episodes,
    and fast.example is never held back."""
    slow, fast = 10, 30
    account_id, campaign_id = _committed_campaign(
        engine, [f"s{n}@slow.example" for n in range(slow)] + [f"f{n}@fast.example" for n in range(fast)]
    )
    try:
        with running_sink() as sink:
            sink.throttle_domain, sink.throttle_limit, sink.throttle_window = "slow.example", 4, 3.0
            started = time.monotonic()
            with shipped_worker(
                database_url,
                tmp_path / "var",
                "http://127.0.0.1:9",
                TIDINGS_SMTP_URL=f"{sink.url}?passthrough=1",
                TIDINGS_SMTP_THROTTLE_WINDOW="3",
            ) as worker:
                deadline = time.monotonic() + 90
                while len(sink.received) < slow + fast and time.monotonic() < deadline:
                    time.sleep(0.2)
                assert len(sink.received) == slow + fast, worker.tail()
            per_recipient = Counter(r for message in sink.received for r in message.recipients)
            assert set(per_recipient.values()) == {1}
            with Session(engine) as session:
                states = dict(
                    session.execute(
                        select(Deliverable.state, func.count())
                        .where(Deliverable.campaign_id == campaign_id)
                        .group_by(Deliverable.state)
                    ).all()
                )
                attempts = session.scalars(
                    select(func.max(Deliverable.attempts)).where(Deliverable.campaign_id == campaign_id)
                ).one()
            assert states == {"sent": slow + fast}
            assert attempts == 1  # deferrals spent no attempt
            # fast.example went out at once, before the throttle's pause was over.
            fast_done = [r for r in sink.received if r.recipients[0].endswith("@fast.example")]
            assert len(fast_done) == fast
            refusals = sink.throttle_refused
            assert refusals, "the receiver never throttled: the test tests nothing"
            episodes = 1 + sum(1 for a, b in itertools.pairwise(refusals) if b - a > 1.0)
            assert episodes <= 2, [round(r - started, 2) for r in refusals]
    finally:
        with Session(engine) as session:
            session.execute(delete(Account).where(Account.id == account_id))
            session.commit()


def _committed_campaign(engine: Engine, emails: list[str]) -> tuple[int, int]:
    now = utcnow()
    with Session(engine) as session:
        user = create_user(session, email="pace@example.com", name="P", contact_limit=1000)
        account_id = user.account_id
        readers = ContactList(account_id=account_id, user_id=user.id, name="All")
        session.add(readers)
        session.flush()
        session.execute(
            insert(Contact), [{"account_id": account_id, "email": e, "email_key": e} for e in emails]
        )
        ids = session.scalars(select(Contact.id).where(Contact.account_id == account_id)).all()
        session.execute(
            insert(ListMembership),
            [{"list_id": readers.id, "contact_id": cid, "created_at": now} for cid in ids],
        )
        campaign = Campaign(
            account_id=account_id,
            title="Paced",
            subject="Paced",
            html="<p>Hello</p>",
            from_name="T",
            from_email="news@example.com",
            scheduled_at=now,
        )
        session.add(campaign)
        session.flush()
        session.add(CampaignList(campaign_id=campaign.id, list_id=readers.id))
        session.commit()
        return account_id, campaign.id
