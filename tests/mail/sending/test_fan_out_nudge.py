"""A fan-out that queued a campaign nudges the send lanes (kit.jobs.Lanes.nudge): the campaign's first
emails go at once, not at the first lane's next poll (up to SEND_LANE_SECONDS later)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.mail.jobs import MailJobs


def test_a_fan_out_that_queued_a_campaign_nudges_the_first_send_lane(
    settings: Settings, session_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = MailJobs(settings, session_factory)
    try:
        lanes = {job.name: job for job in jobs.jobs()}
        first = lanes["send lane 0"]
        assert first.wake is not None and not first.wake.is_set()
        monkeypatch.setattr(jobs.worker, "fan_out", lambda: [])
        assert asyncio.run(jobs.fan_out()) == 0
        assert not first.wake.is_set()  # nothing queued: the lane polls at its interval
        monkeypatch.setattr(jobs.worker, "fan_out", lambda: [7])
        assert asyncio.run(jobs.fan_out()) == 1
        assert first.wake.is_set()
    finally:
        jobs.worker.close()
