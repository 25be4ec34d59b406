"""Campaign progress in the worker's log: a line when a campaign starts sending, one at each tenth of
it or each minute (whichever comes first), and one when it finishes (count, rate, failures).

The lines come from counts the worker has anyway: the emails its fan-out queued and the outcomes it
records, a dictionary update a batch. Only the process that fanned a campaign out follows it. When it
stops hearing of the campaign before its count is reached (other `tidings worker` processes took a
share, contacts went away and their emails were cancelled), it asks the database once in a while, and
only while it has nothing to send, how the campaign stands.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.mail.sending.queue import MAX_ATTEMPTS, Outcome, SendResult
from app.mail.stats import SendingTotals

log = logging.getLogger("tidings.sending")

EVERY = timedelta(minutes=1)
# While idle, a followed campaign's standing is read from the database at most this often.
CHECK_EVERY = timedelta(seconds=10)


@dataclass(slots=True)
class _Followed:
    total: int
    started: datetime
    last_line: datetime
    sent: int = 0
    failed: int = 0
    # The next tenth of `total` (1 to 9) that earns a line.
    next_tenth: int = 1

    @property
    def done(self) -> int:
        return self.sent + self.failed


def _rate(count: int, since: datetime, now: datetime) -> str:
    seconds = (now - since).total_seconds()
    return f"{count / seconds:.1f} emails/s" if seconds > 0 else "- emails/s"


def _elapsed(since: datetime, now: datetime) -> str:
    return f"{max((now - since).total_seconds(), 0.0):.1f} s"


class CampaignProgress:
    def __init__(self) -> None:
        self._followed: dict[int, _Followed] = {}
        self._last_check: datetime | None = None
        # The fan-out runs in a thread of its own, the lanes record on the event loop.
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._followed)

    def followed(self) -> list[int]:
        with self._lock:
            return list(self._followed)

    def started(self, queued: dict[int, int], now: datetime) -> None:
        """The campaigns a fan-out just queued, with how many emails each."""
        with self._lock:
            self._start(queued, now)

    def _start(self, queued: dict[int, int], now: datetime) -> None:
        for campaign_id, total in queued.items():
            log.info("campaign %d started sending: %d emails queued", campaign_id, total)
            if total == 0:
                log.info("campaign %d finished: no recipients", campaign_id)
                continue
            self._followed[campaign_id] = _Followed(total=total, started=now, last_line=now)

    def recorded(self, outcomes: Sequence[Outcome], now: datetime) -> None:
        """A batch's outcomes were recorded: count those of followed campaigns, then write the lines due."""
        with self._lock:
            self._record(outcomes, now)

    def _record(self, outcomes: Sequence[Outcome], now: datetime) -> None:
        followed = self._followed
        for outcome in outcomes:
            campaign = followed.get(outcome.campaign_id)
            if campaign is None:
                continue
            result = outcome.result
            if result == SendResult.SENT:
                campaign.sent += 1
            elif result == SendResult.DEFERRED:
                continue  # the relay's pace: it comes back later
            elif result != SendResult.RETRY or outcome.attempts >= MAX_ATTEMPTS:
                # failed, bounced at the SMTP dialogue, or a temporary failure given up on
                campaign.failed += 1
        for campaign_id, campaign in list(followed.items()):
            if campaign.done >= campaign.total:
                self._finish(campaign_id, campaign, now)
                continue
            tenth = campaign.done * 10 // campaign.total
            if tenth >= campaign.next_tenth or now - campaign.last_line >= EVERY:
                self._line(campaign_id, campaign, campaign.done, campaign.failed, now)

    def check_due(self, now: datetime) -> bool:
        """Whether an idle worker should read the followed campaigns' standing now."""
        if not self._followed:
            return False
        if self._last_check is not None and now - self._last_check < CHECK_EVERY:
            return False
        self._last_check = now
        return True

    def checked(self, standings: dict[int, SendingTotals], now: datetime) -> None:
        """What the database says of followed campaigns: those with nothing left to send are finished
        (counts from the database, whoever sent them); the others get their minute's line."""
        with self._lock:
            self._settle(standings, now)

    def _settle(self, standings: dict[int, SendingTotals], now: datetime) -> None:
        for campaign_id, standing in standings.items():
            campaign = self._followed.get(campaign_id)
            if campaign is None:
                continue
            if standing.pending == 0:
                self._followed.pop(campaign_id)
                done = standing.sent + standing.failed
                log.info(
                    "campaign %d finished: %d sent, %d failed, %d cancelled in %s (%s)",
                    campaign_id,
                    standing.sent,
                    standing.failed,
                    standing.cancelled,
                    _elapsed(campaign.started, now),
                    _rate(done, campaign.started, now),
                )
            elif now - campaign.last_line >= EVERY:
                self._line(campaign_id, campaign, standing.sent + standing.failed, standing.failed, now)

    def _line(self, campaign_id: int, campaign: _Followed, done: int, failed: int, now: datetime) -> None:
        log.info(
            "campaign %d: %d of %d emails done (%d%%), %s, %d failed",
            campaign_id,
            done,
            campaign.total,
            done * 100 // campaign.total,
            _rate(done, campaign.started, now),
            failed,
        )
        campaign.last_line = now
        campaign.next_tenth = min(done * 10 // campaign.total, 9) + 1

    def _finish(self, campaign_id: int, campaign: _Followed, now: datetime) -> None:
        del self._followed[campaign_id]
        log.info(
            "campaign %d finished: %d sent, %d failed in %s (%s)",
            campaign_id,
            campaign.sent,
            campaign.failed,
            _elapsed(campaign.started, now),
            _rate(campaign.done, campaign.started, now),
        )
