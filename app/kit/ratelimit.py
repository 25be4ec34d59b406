"""Request rate limits with the `limits` library: in memory, or in Redis when several processes serve."""

from __future__ import annotations

from dataclasses import dataclass

from limits import RateLimitItem, parse
from limits.storage import MemoryStorage, Storage, storage_from_string
from limits.strategies import MovingWindowRateLimiter

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
    """One limit (for example `60/minute`) applied per key (for example per user)."""

    def __init__(self, limit: str, redis_url: str = "") -> None:
        self.item: RateLimitItem = parse(limit)
        storage = storage_from_string(redis_url) if redis_url else MemoryStorage()
        assert isinstance(storage, Storage)  # the synchronous kind: routes run in worker threads
        self.storage = storage
        self.limiter = MovingWindowRateLimiter(self.storage)

    def hit(self, namespace: str, key: str) -> RateDecision:
        allowed = self.limiter.hit(self.item, namespace, key)
        reset_at, remaining = self.limiter.get_window_stats(self.item, namespace, key)
        retry_after = max(1, int(reset_at - utcnow().timestamp()) + 1)
        return RateDecision(
            allowed=allowed, limit=self.item.amount, remaining=max(0, remaining), retry_after=retry_after
        )
