"""The rate limiter's own storage and the shared-storage setting."""

import asyncio

import pytest
from fastapi import HTTPException
from limits import parse
from limits.aio.strategies import SlidingWindowCounterRateLimiter

from app.api.rate_limits import CounterStorage, TurnLimits, shared_storage
from app.settings import ApiSettings


async def test_expired_counters_leave_the_storage() -> None:
    storage = CounterStorage()
    limiter = SlidingWindowCounterRateLimiter(storage)
    per_second = parse("2/second")
    for n in range(100):
        assert await limiter.hit(per_second, "caller", str(n))
    assert await limiter.hit(per_second, "caller", "0")
    assert not await limiter.hit(per_second, "caller", "0")  # the third within the second
    await asyncio.sleep(2.05)  # a counter lives two windows: the next one weighs it
    assert await limiter.hit(per_second, "caller", "new")
    assert await storage.reset() == 1  # the 100 old counters went with that hit


def test_a_shared_storage_must_be_async_with_sliding_windows() -> None:
    with pytest.raises(ValueError, match="not an async `limits` storage"):
        shared_storage("memory://")
    assert shared_storage("async+memory://") is not None


async def test_limits_through_a_shared_storage_uri() -> None:
    settings = ApiSettings(rate_limit_storage_url="async+memory://", caller_rate="1/hour")
    limits = TurnLimits(settings, metrics_enabled=False)
    await limits.take("a", "backend:shop")
    with pytest.raises(HTTPException) as refused:
        await limits.take("b", "backend:shop")
    assert refused.value.status_code == 429
    await limits.take("b", "backend:mall")


def test_the_old_author_rate_setting_says_what_it_became() -> None:
    with pytest.raises(ValueError, match="author_rate is now caller_rate"):
        ApiSettings.model_validate({"author_rate": "30/minute"})
