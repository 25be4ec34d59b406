"""The rate limiter on its own: the window, the headers, and Redis shared between two processes' limiters."""

from __future__ import annotations

import uuid

import pytest
import redis

from app.kit.ratelimit import RateLimiter

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_memory_limiter_counts_down_then_refuses_with_retry_after() -> None:
    limiter = RateLimiter("3/minute")
    decisions = [await limiter.hit("mail", "user-1") for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert [d.remaining for d in decisions] == [2, 1, 0, 0]
    assert decisions[0].headers() == {"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "2"}
    refused = decisions[-1].headers()
    assert 1 <= int(refused["Retry-After"]) <= 121
    # Another key has its own window.
    assert (await limiter.hit("mail", "user-2")).allowed


@pytest.mark.anyio
async def test_redis_storage_is_shared_between_limiters() -> None:
    try:
        redis.Redis.from_url(REDIS_URL).ping()
    except redis.RedisError:
        pytest.fail(f"Redis at {REDIS_URL} must be running for this test")
    key = f"test-{uuid.uuid4()}"
    first = RateLimiter("2/minute", REDIS_URL)
    second = RateLimiter("2/minute", REDIS_URL)
    assert (await first.hit("mail", key)).allowed
    assert (await second.hit("mail", key)).allowed
    # Two processes behind one Redis see one budget.
    assert not (await first.hit("mail", key)).allowed
    assert not (await second.hit("mail", key)).allowed


@pytest.mark.anyio
async def test_exact_limiter_peeks_without_counting_and_refuses_until_the_oldest_hit_leaves() -> None:
    limiter = RateLimiter("2/15 minutes", exact=True)
    for _ in range(5):
        assert (await limiter.peek("sign-in", "grace")).allowed
    await limiter.hit("sign-in", "grace")
    await limiter.hit("sign-in", "grace")
    refused = await limiter.peek("sign-in", "grace")
    assert not refused.allowed
    assert 14 * 60 <= refused.retry_after <= 15 * 60 + 1
    assert (await limiter.peek("sign-in", "ada")).allowed
