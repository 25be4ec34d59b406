"""Domain errors carry their HTTP status; each interface renders them in its own body shape."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """A failure a client caused or must hear about, with the status that says so.

    `errors` maps field names to messages (validation); `code` is a machine-readable name for the
    interfaces that use one; `extra` adds keys to the body (for example `usages` on a 409).
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        errors: dict[str, list[str]] | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.errors = errors
        self.extra = extra or {}
        self.headers = headers or {}


class NotFound(DomainError):
    def __init__(self, message: str = "Not found.") -> None:
        super().__init__(404, message, code="not_found")


class Conflict(DomainError):
    def __init__(self, message: str, *, code: str = "conflict", extra: dict[str, Any] | None = None) -> None:
        super().__init__(409, message, code=code, extra=extra)


class Forbidden(DomainError):
    def __init__(self, message: str) -> None:
        super().__init__(403, message, code="forbidden")


class ValidationFailed(DomainError):
    """Invalid input. The status differs per route (400 or 422 on the email API), so callers choose it."""

    def __init__(
        self, errors: dict[str, list[str]], *, status: int = 422, message: str | None = None
    ) -> None:
        if message is None:
            message = summarize(errors)
        super().__init__(status, message, code="validation_error", errors=errors)


def summarize(errors: dict[str, list[str]]) -> str:
    """Laravel's summary line: the first message, and how many more there are."""
    messages = [m for ms in errors.values() for m in ms]
    if not messages:
        return "The given data was invalid."
    more = len(messages) - 1
    if more == 0:
        return messages[0]
    return f"{messages[0]} (and {more} more error{'s' if more > 1 else ''})"
