"""Moments written as openmagpie's clients write them (a seek target, an activity export's window, a
backfill's window), resolved on the server's clock:

- a keyword: `now`, `today`, `yesterday`, `this-week` (00:00 UTC of that day, Monday for the week), and,
  where the caller has one, `oldest` (its floor: a feed's retention start for a seek);
- a duration back from now: a whole number and one of `s`, `m`, `h`, `d`, `w` (`7d`, `24h`);
- an ISO 8601 date or date-time (without an offset it is UTC).

Anything else is a ValueError whose text is fit for a 400's detail.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

DURATION = re.compile(r"(\d{1,9})([smhdw])")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
KEYWORDS = ("now", "today", "yesterday", "this-week")
# openmagpie's rule for a window given only its end: it starts this long before.
DEFAULT_SPAN = timedelta(days=7)
WINDOW_PARAMS = ("occurred_since", "occurred_until", "completed_since", "completed_until")
MAX_TEXT = 64


def resolve_moment(raw: str, *, now: datetime, floor: datetime | None = None) -> datetime:
    """`raw` as an aware UTC moment (see the module's grammar); `floor` is what `oldest` means."""
    text = raw.strip()
    if len(text) > MAX_TEXT:
        raise ValueError(f"must be at most {MAX_TEXT} characters")
    word = text.lower()
    midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if word == "now":
        return now
    if word == "today":
        return midnight
    if word == "yesterday":
        return midnight - timedelta(days=1)
    if word == "this-week":
        return midnight - timedelta(days=midnight.weekday())
    if word == "oldest":
        if floor is None:
            raise ValueError("`oldest` is only a seek target")
        return floor
    duration = DURATION.fullmatch(text)
    if duration is not None:
        try:
            return now - timedelta(**{UNITS[duration.group(2)]: int(duration.group(1))})
        except OverflowError:
            raise ValueError(f"{raw!r} is too far back") from None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        words = ", ".join(KEYWORDS + (("oldest",) if floor is not None else ()))
        raise ValueError(
            f"{raw!r} is not a keyword ({words}), a duration (7d, 24h, 30m) or an ISO 8601 date-time"
        ) from None
    try:
        return parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    except OverflowError:
        raise ValueError(f"{raw!r} has no UTC equivalent") from None


def resolve_windows(raw: Mapping[str, str], *, now: datetime) -> dict[str, datetime]:
    """The `WINDOW_PARAMS` present in `raw`, resolved. A `*_until` without its `*_since` starts
    `DEFAULT_SPAN` before it; a `*_since` not before its `*_until` is an error. Keys are the params';
    an error's message starts with the parameter's name and `: `."""
    resolved: dict[str, datetime] = {}
    for name in WINDOW_PARAMS:
        value = raw.get(name)
        if value:
            try:
                resolved[name] = resolve_moment(value, now=now)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
    for base in ("occurred", "completed"):
        since, until = f"{base}_since", f"{base}_until"
        if until in resolved and since not in resolved:
            try:
                resolved[since] = resolved[until] - DEFAULT_SPAN
            except OverflowError:
                raise ValueError(f"{until}: too early to start a window before it") from None
        if since in resolved and until in resolved and resolved[since] >= resolved[until]:
            raise ValueError(f"{since}: must be before {until}")
    return resolved
