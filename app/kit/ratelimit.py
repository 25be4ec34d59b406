"""Request rate limits with the `limits` library: in memory, or in Redis when several processes serve.

The asynchronous flavour, so a check never takes a worker thread, and the sliding-window counter, which
costs the same for every request whatever the limit (a moving window keeps one entry per request).
"""

from __future__ import annotations

from dataclasses import dataclass

from limits import RateLimitItem, parse
from limits.aio.storage import MemoryStorage, Storage
from limits.aio.strategies import (
    MovingWindowRateLimiter,
    SlidingWindowCounterRateLimiter,
)
from limits.aio.strategies import (
    RateLimiter as LimitsStrategy,
)
from limits.storage import storage_from_string

from app.kit.time import utcnow


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    limit: int
    remaining: int
    retry_after: int

    def headers(self) -> dict[str, str]:
        headers = {"X-RateLimit-Limit": str(self.limit), "X-RateLimit-Remaining": str(self.remaining)}
        if not self.allowed:
            headers["Retry-After"] = str(self.retry_after)
        return headers


class RateLimiter:
    """One limit (for example `60/minute`) applied per key (for example per user).

    `exact=True` uses the moving window, which remembers every hit: a key over its limit stays refused
    until its oldest hit leaves the window (sign-in lockouts), where the sliding counter only estimates.
    """

    def __init__(self, limit: str, redis_url: str = "", *, exact: bool = False) -> None:
        self.item: RateLimitItem = parse(limit)
        storage = (
            storage_from_string(f"async+{redis_url}", implementation="redispy")
            if redis_url
            else MemoryStorage()
        )
        if not isinstance(storage, Storage):
            raise TypeError(f"{redis_url} gives no asynchronous rate-limit storage")
        self.storage = storage
        self.limiter: LimitsStrategy = (
            MovingWindowRateLimiter(storage) if exact else SlidingWindowCounterRateLimiter(storage)
        )

    async def hit(self, namespace: str, key: str) -> RateDecision:
        allowed = await self.limiter.hit(self.item, namespace, key)
        return await self._decision(allowed, namespace, key)

    async def peek(self, namespace: str, key: str) -> RateDecision:
        """Whether one more hit would be allowed, without counting one."""
        allowed = await self.limiter.test(self.item, namespace, key)
        return await self._decision(allowed, namespace, key)

    async def _decision(self, allowed: bool, namespace: str, key: str) -> RateDecision:
        stats = await self.limiter.get_window_stats(self.item, namespace, key)
        retry_after = max(1, int(stats.reset_time - utcnow().timestamp()) + 1)
        return RateDecision(
            allowed=allowed,
            limit=self.item.amount,
            remaining=max(0, stats.remaining),
            retry_after=retry_after,
        )
