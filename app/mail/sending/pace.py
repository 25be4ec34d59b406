"""How fast a relay (or a receiving domain behind it) takes email: a cap, and AIMD back-off on throttles.

Relays and receivers answer a sender that goes too fast with a temporary refusal: Amazon SES `454
Throttling failure: Maximum sending rate exceeded`, Gmail `421-4.7.28 ... unusual rate`, Microsoft
`451 4.7.500 Server busy` and other 4.7.x. Such an email is not failing; it is early. A `Pace` then
(multiplicative decrease) halves the rate it allows, starting from what was accepted over the last
`window` (receivers count per minute or hour, so a burst's instantaneous rate says nothing), pauses
for a `window` so that the receiver's count runs out, and after that (additive increase) grows by a
hundredth of the halved rate with each accepted email. A throttle reply to an email that was already
on its way when the rate was last halved is the same episode and halves nothing more.

Email a pace cannot take now is handed a later moment of its own (`defer`), spaced at the pace's rate,
so that deferred email comes back a few at a time rather than all at once.

All times are the event loop's (monotonic seconds). A pace belongs to one process: several workers each
find the rate themselves.
"""

from __future__ import annotations

import math
import re

from app.mail.bounces.bounce_classes import ENHANCED_STATUS

# Each accepted email adds this share of the halved rate back (100 emails to recover it).
GROWTH_SHARE = 0.01
THROTTLE_WORDS = re.compile(
    r"throttl|rate limit|sending rate|too many (?:messages|emails|mails|connections)|slow down"
    r"|unusual rate|try again later|server busy",
    re.IGNORECASE,
)
# Greylisting (a first attempt refused on principle, often `451 4.7.1`) is no rate: the retry passes.
GREYLIST_WORDS = re.compile(r"gr[ae]y ?list", re.IGNORECASE)


def is_throttle(code: int, text: str) -> bool:
    """Whether a reply asks the sender to slow down: a 4xx with an RFC 3463 4.7.x code (policy,
    rate), or whose words say so (SES's 454 carries no enhanced code); greylisting is not one."""
    if not 400 <= code < 500 or GREYLIST_WORDS.search(text):
        return False
    match = ENHANCED_STATUS.search(text)
    if match is not None and match.group(1) == "4" and match.group(2) == "7":
        return True
    return THROTTLE_WORDS.search(text) is not None


class Pace:
    """The rate one relay, or one receiving domain through it, takes: at most `cap` emails a second
    (None: no cap), less after a throttle reply (see the module)."""

    def __init__(self, cap: float | None, window: float) -> None:
        self.cap = cap
        self.window = window
        # Emails a second allowed now; None: as fast as the connections go.
        self.rate: float | None = cap
        # The sending clock: the next email may start at this moment, and takes 1/rate with it.
        self.next_at = 0.0
        self.paused_until = 0.0
        # The last moment handed to a deferred email; the next deferred one gets a later one.
        self.horizon = 0.0
        # The latest halving: emails started before it belong to its episode.
        self.halved_at = -math.inf
        self.growth = 0.0
        # Accepted emails in the current and the previous window, for the rate measured at a throttle.
        self.window_start = 0.0
        self.in_window = 0
        self.in_previous_window = 0
        # Totals, for /metrics.
        self.accepted = 0
        self.throttles = 0
        self.deferred = 0

    @property
    def limiting(self) -> bool:
        """Whether this pace holds anything back (otherwise the send path skips it)."""
        return self.rate is not None or self.paused_until > 0

    def slot(self, now: float) -> float:
        """The earliest moment the next email may start."""
        return max(now, self.next_at, self.paused_until)

    def take(self, moment: float) -> None:
        """An email starts at `moment` (a `slot`): the next one waits 1/rate after it."""
        if self.rate is not None:
            self.next_at = max(self.next_at, moment) + 1 / self.rate

    def defer(self, now: float) -> float:
        """A later moment for an email this pace cannot take now: after the pause and every moment
        handed out before, one interval apart."""
        interval = 1 / self.rate if self.rate else 0.0
        self.horizon = max(self.slot(now), self.horizon + interval)
        self.deferred += 1
        return self.horizon

    def took(self, now: float) -> None:
        """The relay accepted an email."""
        self.accepted += 1
        if now - self.window_start >= self.window:
            fresh = now - self.window_start >= 2 * self.window
            self.in_previous_window = 0 if fresh else self.in_window
            self.in_window = 0
            self.window_start = now
        self.in_window += 1
        if self.growth and self.rate is not None:
            self.rate += self.growth
            if self.cap is not None and self.rate >= self.cap:
                self.rate, self.growth = self.cap, 0.0

    def throttled(self, now: float, started: float) -> None:
        """A throttle reply came to an email started at `started`."""
        self.throttles += 1
        self.paused_until = max(self.paused_until, now + self.window)
        if started < self.halved_at:
            return  # on its way before the last halving: the same episode
        self.halved_at = now
        measured = self.accepted_over_window(now) / self.window
        current = self.rate if self.rate is not None else math.inf
        # At least one email a window, or the pace would never find out that the receiver recovered.
        self.rate = max(min(current, measured) / 2, 1 / self.window)
        self.growth = self.rate * GROWTH_SHARE

    def accepted_over_window(self, now: float) -> float:
        """Accepted emails over the last window: the current one, and the previous one's share of it."""
        elapsed = now - self.window_start
        if elapsed >= 2 * self.window:
            return 0.0
        if elapsed >= self.window:
            return self.in_window * max(0.0, 2 - elapsed / self.window)
        return self.in_window + self.in_previous_window * (1 - elapsed / self.window)
