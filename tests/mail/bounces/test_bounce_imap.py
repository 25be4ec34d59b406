"""The worker's bounce mailbox poll against a real IMAP server (a throwaway Dovecot,
tests/mail/bounces/dovecot.py):
a real `tidings worker` with TIDINGS_BOUNCE_IMAP_URL reads the unseen DSNs, marks their deliverables
bounced, applies mail to a List-Unsubscribe mailto address, deletes both and leaves any other message
seen for a person to read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.mail.bounces import dsn_samples
from tests.mail.bounces.dovecot import Dovecot, running_dovecot
from tests.mail.bounces.test_bounce_mailbox import unsubscribed
from tests.mail.conftest import BOUNCE_DOMAIN, Sent, state_of
from tests.processes import shipped_worker
from tests.shipped import wait_until


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    with running_dovecot() as server:
        yield server


def test_the_worker_reads_dsns_from_the_imap_mailbox(sent: Sent, engine: Engine, dovecot: Dovecot) -> None:
    hard, soft, human, leaving = sent.take(), sent.take(), sent.take(), sent.take()
    dovecot.deliver(dsn_samples.gmail(hard.mail_from, hard.address, hard.message_id))
    # A person using the List-Unsubscribe mailto address of their email (the bounce domain's mail lands
    # in the same mailbox).
    dovecot.deliver(dsn_samples.unsubscribe_request(leaving.list_unsubscribe))
    dovecot.deliver(dsn_samples.postfix_delay(soft.mail_from, soft.address, soft.message_id))
    dovecot.deliver(dsn_samples.human_reply(human.mail_from))
    with shipped_worker(
        sent.database_url,
        sent.var_dir,
        "https://mail.example.org",
        TIDINGS_BOUNCE_DOMAIN=BOUNCE_DOMAIN,
        TIDINGS_BOUNCE_IMAP_URL=dovecot.url,
        TIDINGS_BOUNCE_IMAP_INTERVAL="0.5",
    ) as worker:
        wait_until(lambda: state_of(engine, hard) == ("bounced", True, True), "the hard bounce", worker)
        wait_until(lambda: unsubscribed(engine, leaving), "the unsubscribe request", worker)
        # The two bounces and the request are expunged; the reply stays, seen.
        wait_until(lambda: len(dovecot.flags()) == 1, "the bounces deleted from the mailbox", worker)
        assert "\\Seen" in dovecot.flags()[0]
        assert state_of(engine, soft) == ("sent", False, False)
        assert state_of(engine, human) == ("sent", False, False)
        assert not unsubscribed(engine, human) and not unsubscribed(engine, hard)
        # A bounce arriving later is read by a later poll.
        late = sent.take()
        dovecot.deliver(dsn_samples.exchange(late.mail_from, late.address, late.message_id))
        wait_until(lambda: state_of(engine, late) == ("bounced", True, True), "the late bounce", worker)
        wait_until(lambda: len(dovecot.flags()) == 1, "the late bounce deleted", worker)
    log = worker.output()
    assert f"hard bounce (5.1.1) of deliverable {hard.deliverable_id}" in log
    assert f"soft bounce (4.4.1) of deliverable {soft.deliverable_id}" in log
    assert "ignored: not a bounce" in log
    assert f"unsubscribe request for deliverable {leaving.deliverable_id}" in log
    assert "bounce-mailbox-pass" not in log  # the password never reaches the log


def test_an_unreadable_message_is_flagged_and_the_ones_after_it_are_read(
    sent: Sent, engine: Engine, dovecot: Dovecot
) -> None:
    deep, hard = sent.take(), sent.take()
    dovecot.deliver(dsn_samples.nested_multiparts(1000, deep.mail_from))
    dovecot.deliver(dsn_samples.without_from(deep.mail_from))
    dovecot.deliver(dsn_samples.gmail(hard.mail_from, hard.address, hard.message_id))
    with shipped_worker(
        sent.database_url,
        sent.var_dir,
        "https://mail.example.org",
        TIDINGS_BOUNCE_DOMAIN=BOUNCE_DOMAIN,
        TIDINGS_BOUNCE_IMAP_URL=dovecot.url,
        TIDINGS_BOUNCE_IMAP_INTERVAL="0.5",
    ) as worker:
        wait_until(lambda: state_of(engine, hard) == ("bounced", True, True), "the bounce after it", worker)
        # The bounce is expunged; the unreadable message and the one without a sender stay, seen.
        wait_until(lambda: len(dovecot.flags()) == 2, "the bounce deleted from the mailbox", worker)
        assert all("\\Seen" in flags for flags in dovecot.flags())
    log = worker.output()
    assert log.count("ignored: unreadable") == 1
    assert f"hard bounce (5.1.1) of deliverable {hard.deliverable_id}" in log
    assert state_of(engine, deep) == ("sent", False, False)
    # (shipped_worker fails the test on any traceback in the log.)


def test_a_mailbox_that_refuses_the_login_is_logged_and_retried(
    database_url: str, dovecot: Dovecot, tmp_path: Path
) -> None:
    wrong = dovecot.url.replace("bounce-mailbox-pass", "wrong-password")
    with shipped_worker(
        database_url,
        tmp_path / "var",
        "https://mail.example.org",
        TIDINGS_BOUNCE_IMAP_URL=wrong,
        TIDINGS_BOUNCE_IMAP_INTERVAL="0.5",
    ) as worker:
        wait_until(
            lambda: worker.output().count("bounce mailbox poll") >= 2, "two failed polls", worker, patience=60
        )
    assert "wrong-password" not in worker.output()
