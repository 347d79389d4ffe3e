"""The rate limiter's own storage, the shared-storage setting, and the limits taken by
concurrent turns, in memory and in a real Redis server."""

import asyncio
from pathlib import Path

import coredis
import pytest
from fastapi import HTTPException
from limits import parse
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from pydantic import ValidationError

from app.api.rate_limits import CounterStorage, Reservation, TurnLimits, shared_storage
from app.settings import ApiSettings
from tests.conftest import redis_server


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


def test_a_shared_storage_must_be_one_whose_hits_can_be_given_back() -> None:
    for url in (
        "memory://",
        "redis://127.0.0.1:6379",  # not async
        "async+valkey://127.0.0.1:6379",  # another client, not installed
        "async+memcached://127.0.0.1:11211",
        "async+mongodb://127.0.0.1",
    ):
        with pytest.raises(ValidationError, match="not an async Redis `limits` storage"):
            ApiSettings(rate_limit_storage_url=url)
    assert shared_storage("async+memory://") is not None
    assert shared_storage("async+redis://user:password@127.0.0.1:6379/1") is not None


async def test_limits_through_a_shared_storage_uri() -> None:  # within one process
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


async def outcomes(limits: TurnLimits, caller: str, turns: int) -> list[Reservation | int]:
    """`turns` turns of one caller at once, each in a conversation of its own: what each
    was given, a reservation or a refusal's status code."""

    async def turn(n: int) -> Reservation | int:
        try:
            return await limits.take(f"conversation-{n}", caller)
        except HTTPException as refused:
            return refused.status_code

    return await asyncio.gather(*(turn(n) for n in range(turns)))


async def test_concurrent_turns_of_one_caller_pass_a_window_once_each(
    rate_limit_storage_url: str | None,
) -> None:
    settings = ApiSettings(caller_rate="10/minute", rate_limit_storage_url=rate_limit_storage_url)
    limits = TurnLimits(settings, metrics_enabled=False)
    given = await outcomes(limits, "backend:shop", 50)
    assert sum(isinstance(outcome, Reservation) for outcome in given) == 10
    assert given.count(429) == 40
    assert isinstance((await outcomes(limits, "backend:mall", 1))[0], Reservation)


async def test_a_refused_turn_gives_back_the_windows_it_took(
    rate_limit_storage_url: str | None,
) -> None:
    settings = ApiSettings(
        conversation_rate="1/hour",
        caller_rate="2/hour",
        caller_token_budget="1000/hour",
        turn_token_estimate=600,
        rate_limit_storage_url=rate_limit_storage_url,
    )
    limits = TurnLimits(settings, metrics_enabled=False)
    for key in ("shop-1", "shop-2"):  # two turns that spent nothing
        await limits.release(await limits.take(key, "backend:shop"))
    for _ in range(3):  # the conversation's window is hit before the caller's refuses
        with pytest.raises(HTTPException, match="too many turns for this caller"):
            await limits.take("shared", "backend:shop")
    await limits.take("shared", "backend:mall")  # no turn of "shared" stayed counted
    # Refused by the token budget (600 of 1,000 held) after both turn windows were hit.
    first = await limits.take("tenant-1", "backend:tenant")
    with pytest.raises(HTTPException, match="token budget is spent"):
        await limits.take("tenant-2", "backend:tenant")
    await limits.take("tenant-2", "backend:other")  # the conversation's turn was given back
    await limits.release(first)
    await limits.take("tenant-3", "backend:tenant")  # and so was the caller's


async def test_concurrent_turns_start_only_on_budget_left_for_each(
    rate_limit_storage_url: str | None,
) -> None:
    settings = ApiSettings(
        caller_token_budget="3000/hour",
        turn_token_estimate=1000,
        rate_limit_storage_url=rate_limit_storage_url,
    )
    limits = TurnLimits(settings, metrics_enabled=False)
    given = await outcomes(limits, "backend:shop", 50)
    running = [outcome for outcome in given if isinstance(outcome, Reservation)]
    assert len(running) == 3 and given.count(429) == 47


async def test_the_first_concurrent_turns_on_a_new_redis_count_once(tmp_path: Path) -> None:
    """On a server that has run no turn yet, concurrent turns find the rate limits' scripts
    loaded: no NOSCRIPT reply drops the connection they share (and resends their hits)."""
    with redis_server(tmp_path) as port:
        url = f"redis://127.0.0.1:{port}/1"
        settings = ApiSettings(
            caller_token_budget="3000/hour",
            turn_token_estimate=1000,
            rate_limit_storage_url=f"async+{url}",
        )
        given = await outcomes(TurnLimits(settings, metrics_enabled=False), "backend:shop", 50)
        errors = await coredis.Redis.from_url(url, decode_responses=True).info("errorstats")
    assert not any("NOSCRIPT" in name for name in errors), errors
    assert sum(isinstance(outcome, Reservation) for outcome in given) == 3


async def test_a_reservation_is_settled_by_what_the_turn_spent(
    rate_limit_storage_url: str | None,
) -> None:
    settings = ApiSettings(
        caller_token_budget="2000/hour",
        turn_token_estimate=1000,
        rate_limit_storage_url=rate_limit_storage_url,
    )
    limits = TurnLimits(settings, metrics_enabled=False)

    async def refused() -> bool:
        try:
            await limits.take("c", "backend:shop")
        except HTTPException as refusal:
            assert "token budget is spent (2000 per 1 hour)" in refusal.detail
            return True
        return False

    first, second = await limits.take("a", "backend:shop"), await limits.take("b", "backend:shop")
    assert await refused()  # two estimates hold the window
    await limits.settle(first, "backend", 100)  # 900 given back: 1,100 held
    assert await refused()  # 900 left is less than a turn's estimate
    await limits.release(second)  # a failed turn: nothing spent, 100 held
    await limits.settle(second, "backend", 1500)  # settled once: this changes nothing
    third = await limits.take("c", "backend:shop")
    await limits.settle(third, "backend", 5000)  # past the budget: the window is full
    assert await refused()
