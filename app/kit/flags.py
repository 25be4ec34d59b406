"""The words a flag in a URL's query or a request's query string reads as on (`?starttls=1`,
`?dry_run=true`): one vocabulary for the relay and mailbox URLs and the /v1 routes. Any other word is
off."""

from __future__ import annotations

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
