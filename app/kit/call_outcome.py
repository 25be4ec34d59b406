"""How one outbound webhook call ended (`kit/webhook_call.py` judges it): what the account webhooks' log
stores for each attempt, and what a watch delivery settles to."""

from __future__ import annotations

from enum import StrEnum


class CallOutcome(StrEnum):
    """`succeeded` (2xx), `errored` (retrying would change nothing: a redirect, another 4xx, a blocked
    destination) or `failed` (worth retrying: 5xx, 408, 429, no answer)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ERRORED = "errored"
