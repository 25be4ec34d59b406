"""One outbound webhook call and how its answer is judged, shared by the watch `webhook` action and the
email API's account webhooks (events out), so both settle a receiver's answer the same way:

- 2xx: `succeeded`;
- any redirect (never followed), a blocked destination, another 4xx: `errored` (retrying would change
  nothing);
- 5xx, 408, 429, a connection error, a timeout: `failed` (worth retrying).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.kit.call_outcome import CallOutcome
from app.kit.safe_http import (
    BlockedDestination,
    InvalidUrl,
    OutboundError,
    OutboundTimeout,
    ResponseTooLarge,
    SafeHttp,
)

RETRYABLE_STATUSES = (408, 429)


@dataclass(frozen=True, slots=True)
class CallResult:
    state: CallOutcome
    # None when no answer came (blocked, refused, timed out).
    http_status: int | None
    # Empty when the call succeeded.
    error: str


def judge(status: int) -> tuple[CallOutcome, str]:
    """The state an HTTP status makes, and the error text it records."""
    if 200 <= status < 300:
        return CallOutcome.SUCCEEDED, ""
    if 300 <= status < 400:
        return (
            CallOutcome.ERRORED,
            f"the receiver answered a redirect (HTTP {status}); redirects are never followed",
        )
    if status >= 500 or status in RETRYABLE_STATUSES:
        return CallOutcome.FAILED, f"the receiver answered HTTP {status}"
    return CallOutcome.ERRORED, f"the receiver answered HTTP {status}"


async def call_webhook(
    http: SafeHttp,
    method: str,
    url: str,
    *,
    headers: Mapping[str, str],
    content: bytes,
    timeout: float,
    max_response_bytes: int,
) -> CallResult:
    """Send one body and judge the answer; never raises for what the receiver or the network does."""
    try:
        response = await http.request(
            method, url, headers=headers, content=content, timeout=timeout, max_bytes=max_response_bytes
        )
    except ResponseTooLarge as exc:
        # The receiver answered; only its answer's body was too long to read. Its status decides.
        note = f"; the answer's body was larger than {max_response_bytes} bytes and was not read"
        if exc.status_code is None:
            return CallResult(CallOutcome.FAILED, None, str(exc))
        state, error = judge(exc.status_code)
        return CallResult(state, exc.status_code, (error + note).removeprefix("; "))
    except (BlockedDestination, InvalidUrl) as exc:
        return CallResult(CallOutcome.ERRORED, None, f"blocked destination: {exc}")
    except OutboundTimeout as exc:
        return CallResult(CallOutcome.FAILED, None, f"the receiver did not answer in time: {exc}")
    except OutboundError as exc:
        return CallResult(CallOutcome.FAILED, None, f"the call failed: {exc}")
    state, error = judge(response.status_code)
    return CallResult(state, response.status_code, error)
