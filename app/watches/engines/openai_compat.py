"""`openai_compat`: any OpenAI-compatible `/v1` endpoint (Ollama, vLLM, llama.cpp's server, OpenAI),
asked through chat completions for a JSON object.

The endpoint is TIDINGS_ENGINE_BASE_URL, set by the operator, not by API users: it is trusted, so it
may be a private or loopback address (a local Ollama is the usual case). Calls still go through
`SafeHttp` with private addresses allowed, for what it gives every outbound call: no redirects
followed, a deadline, and a cap on the answer's size.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from app.config import Settings
from app.kit.safe_http import OutboundError, OutboundTimeout, SafeHttp, SafeResponse
from app.watches.engines.base import EngineError, ItemText, Judgment, SetupProblem, checked_score

SCORE_PROMPT = """You score how relevant an item from a feed is to a reader's interest.
Answer with a JSON object only: {"score": <number from 0.0 to 1.0>, "reason": "<under 200 characters>"}.
0.0 means not relevant at all, 1.0 an obvious, direct match."""

EXTRACT_PROMPT = """You fill named fields from an item from a feed.
Answer with a JSON object only: {"fields": {"<field name>": "<value as text>", ...}}, one entry per
field asked for; use null for a field the item does not tell."""

# How long GET /v1/engines trusts what it last learned of the endpoint (CONTRACT: within 30 s).
STATUS_TTL = 10.0
MAX_ANSWER_BYTES = 4 * 1024 * 1024
NOT_CONFIGURED = SetupProblem(
    reason="No engine is configured: TIDINGS_ENGINE_BASE_URL is empty.",
    how_to_fix="Set TIDINGS_ENGINE_BASE_URL to an OpenAI-compatible /v1 endpoint (for a local Ollama: "
    "http://127.0.0.1:11434/v1), TIDINGS_ENGINE_MODEL to a model it serves, and restart.",
)


class OpenAICompatEngine:
    kind = "openai_compat"

    def __init__(self, settings: Settings, http: SafeHttp | None = None) -> None:
        self.base_url = settings.engine_base_url.rstrip("/")
        self.default_model = settings.engine_model
        self.api_key = settings.engine_api_key
        self.timeout = settings.engine_timeout
        self.retries = max(settings.engine_retries, 0)
        self.http = http or SafeHttp(
            allow_private=True,
            max_bytes=MAX_ANSWER_BYTES,
            timeout=settings.engine_timeout,
            user_agent="tidings engine client",
            max_connections=max(settings.watch_drain_concurrency, 1),
        )
        self._status: tuple[float, dict[str, Any]] | None = None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    async def _send(
        self, method: str, path: str, body: Any = None, timeout: float | None = None
    ) -> SafeResponse:
        if not self.base_url:
            raise EngineError("no engine is configured: TIDINGS_ENGINE_BASE_URL is empty")
        url = f"{self.base_url}{path}"
        attempt = 0
        while True:
            try:
                response = await self.http.request(
                    method, url, headers=self._headers(), json=body, timeout=timeout or self.timeout
                )
            except OutboundError as exc:
                if attempt < self.retries and not isinstance(exc, OutboundTimeout):
                    attempt += 1
                    await asyncio.sleep(0.5 * attempt)
                    continue
                raise EngineError(f"the engine at {self.base_url} is unreachable: {exc}") from exc
            if (response.status_code >= 500 or response.status_code == 429) and attempt < self.retries:
                attempt += 1
                await asyncio.sleep(0.5 * attempt)
                continue
            if response.status_code != 200:
                snippet = response.content[:200].decode("utf-8", "replace")
                raise EngineError(
                    f"the engine at {self.base_url} answered HTTP {response.status_code}: {snippet}"
                )
            return response

    def setup_problem(self) -> SetupProblem | None:
        return None if self.base_url else NOT_CONFIGURED

    async def model_for(self, model: str) -> str:
        chosen = model or self.default_model
        if chosen:
            return chosen
        status = await self.status()
        if not status["available"]:
            # What was cached for GET /v1/engines may be old news: a run asks afresh.
            status = await self._probe()
            self._status = (time.monotonic(), status)
        if not status["available"]:
            raise EngineError(str(status["unreachable_reason"]))
        models = status.get("available_models") or []
        if not models:
            raise EngineError("no engine model is set (TIDINGS_ENGINE_MODEL) and the engine lists none")
        return str(models[0])

    async def _chat(self, system: str, user: str, model: str) -> dict[str, Any]:
        body = {
            "model": await self.model_for(model),
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "stream": False,
        }
        response = await self._send("POST", "/chat/completions", body)
        try:
            content = orjson.loads(response.content)["choices"][0]["message"]["content"]
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
            raise EngineError("the engine's answer is not a chat completion") from exc
        if not isinstance(content, str):
            raise EngineError("the engine's answer has no text content")
        try:
            parsed = orjson.loads(_strip_fence(content))
        except orjson.JSONDecodeError as exc:
            raise EngineError(f"the engine answered prose, not JSON: {content[:200]!r}") from exc
        if not isinstance(parsed, dict):
            raise EngineError(f"the engine answered JSON that is not an object: {content[:200]!r}")
        return parsed

    async def score(self, item: ItemText, instructions: str, model: str) -> Judgment:
        user = f"Reader's interest:\n{instructions}\n\nItem:\n{item.render()}\n\nRespond with JSON only."
        answer = await self._chat(SCORE_PROMPT, user, model)
        if "score" not in answer:
            raise EngineError("the engine's answer has no score")
        reason = answer.get("reason")
        return Judgment(checked_score(answer["score"]), reason[:1000] if isinstance(reason, str) else "")

    async def extract(
        self, item: ItemText, fields: list[dict[str, str]], instructions: str, model: str
    ) -> dict[str, Any]:
        wanted = "\n".join(f"- {f['name']}: {f['description']}" for f in fields)
        extra = f"\nInstructions:\n{instructions}\n" if instructions else ""
        user = f"Fields:\n{wanted}\n{extra}\nItem:\n{item.render()}\n\nRespond with JSON only."
        answer = await self._chat(EXTRACT_PROMPT, user, model)
        found = answer.get("fields", answer)
        if not isinstance(found, dict):
            raise EngineError("the engine's `fields` is not an object")
        return found

    async def status(self) -> dict[str, Any]:
        cached = self._status
        if cached is not None and time.monotonic() - cached[0] < STATUS_TTL:
            return cached[1]
        status = await self._probe()
        self._status = (time.monotonic(), status)
        return status

    async def _probe(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": self.kind,
            "default_model": self.default_model,
            "available": False,
            "available_models": [],
            "unreachable_reason": None,
            "how_to_fix": None,
        }
        problem = self.setup_problem()
        if problem is not None:
            status["unreachable_reason"] = problem.reason
            status["how_to_fix"] = problem.how_to_fix
            return status
        try:
            response = await self._send("GET", "/models", timeout=min(self.timeout, 5.0))
            listed = orjson.loads(response.content).get("data", [])
            models = sorted(str(m["id"]) for m in listed if isinstance(m, dict) and "id" in m)
        except EngineError as exc:
            status["unreachable_reason"] = str(exc)
            status["how_to_fix"] = (
                f"Start the engine server and check that {self.base_url}/models answers; if the "
                "address is wrong, change TIDINGS_ENGINE_BASE_URL and restart."
            )
            return status
        except (orjson.JSONDecodeError, AttributeError, TypeError) as exc:
            status["unreachable_reason"] = f"{self.base_url}/models did not answer a model list ({exc})"
            status["how_to_fix"] = "Point TIDINGS_ENGINE_BASE_URL at the server's OpenAI-compatible /v1 path."
            return status
        status["available"] = True
        status["available_models"] = models
        return status

    async def aclose(self) -> None:
        await self.http.aclose()


def _strip_fence(content: str) -> str:
    """Some models wrap JSON in a Markdown code fence even when asked for JSON only."""
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text.strip()
