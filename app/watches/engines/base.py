"""What every engine offers the actions, and its one error: an engine that cannot answer (down,
timing out, answering prose or an out-of-range score) raises `EngineError`, and the run fails and is
retried; it never passes or gates an item silently."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

# What an engine is shown of an item's text and of its linked article, at most.
ITEM_TEXT_LIMIT = 4000
ARTICLE_TEXT_LIMIT = 8000


class EngineError(Exception):
    """The engine could not give a usable answer; `str()` says why, for the run's `error`."""


@dataclass(frozen=True, slots=True)
class ItemText:
    """What an engine reads of a feed item."""

    source: str
    title: str
    content: str
    url: str = ""
    article: str = ""

    def render(self) -> str:
        lines = [f"Source: {self.source}", f"Title: {self.title}"]
        if self.url:
            lines.append(f"Link: {self.url}")
        lines.append(f"Content: {self.content[:ITEM_TEXT_LIMIT]}")
        if self.article:
            lines.append(f"Linked article: {self.article[:ARTICLE_TEXT_LIMIT]}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Judgment:
    score: float
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SetupProblem:
    """Why an engine cannot run on this server whatever its endpoint answers (nothing configured, the
    optional package missing), and what the operator does about it: what GET /v1/engines says."""

    reason: str
    how_to_fix: str

    def message(self) -> str:
        reason = self.reason if self.reason.endswith(".") else f"{self.reason}."
        return f"{reason} {self.how_to_fix}"


class Engine(Protocol):
    kind: str

    def setup_problem(self) -> SetupProblem | None:
        """Checked without a network call, so a watch write can refuse an action that could never run."""
        ...

    async def score(self, item: ItemText, instructions: str, model: str) -> Judgment: ...

    async def extract(
        self, item: ItemText, fields: list[dict[str, str]], instructions: str, model: str
    ) -> dict[str, Any]: ...

    async def status(self) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...


def checked_score(value: Any) -> float:
    """A score the engine gave, or EngineError: a number from 0 to 1 (a bool or a string is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EngineError(f"the engine's score is not a number: {value!r}"[:300])
    score = float(value)
    if not 0.0 <= score <= 1.0 or score != score:
        raise EngineError(f"the engine's score {score!r} is outside 0 to 1")
    return score
