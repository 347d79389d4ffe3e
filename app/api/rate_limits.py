"""How many turns a conversation and a caller may take over HTTP, and how many model tokens
a caller may spend (the `limits` library, sliding-window counters).

A caller is its credential: an API key, a staff member, or, for an anonymous client, its
address; never the `author` a body names. The counters live in this process's memory
(`CounterStorage`), or in the Redis SUPPORTBOT_API__RATE_LIMIT_STORAGE_URL names,
so that replicas count together."""

import asyncio
import heapq
import math
import time
from collections import Counter as Counts
from dataclasses import dataclass

from fastapi import HTTPException, status
from limits import RateLimitItem, parse_many
from limits.aio.storage import MemoryStorage, RedisStorage, SlidingWindowCounterSupport, Storage
from limits.aio.storage.redis.coredis import CoredisBridge
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from limits.storage.base import TimestampedSlidingWindow
from prometheus_client import Counter

from app.observability.metrics import REGISTRY
from app.settings import ApiSettings, shared_limits_storage

REFUSED = Counter(
    "supportbot_rate_limited",
    "HTTP turns refused with 429, by the limit reached: conversation (turns of one "
    "conversation), caller (turns of one credential), tokens (one credential's token budget)",
    ("scope",),
    registry=REGISTRY,
)
CALLER_TOKENS = Counter(
    "supportbot_caller_tokens",
    "Model tokens (input and output) spent by HTTP turns, by credential kind: staff, "
    "backend, anonymous",
    ("kind",),
    registry=REGISTRY,
)


class CounterStorage(Storage, SlidingWindowCounterSupport, TimestampedSlidingWindow):
    """Counters in this process's memory for the sliding-window-counter strategy, at a cost
    per request that does not grow with the number of keys: expired counters leave through
    a heap ordered by expiry, a few at each request. (`limits`' own MemoryStorage walks
    every key on every hit: 236 ms per request at 1,000 keys with moving windows.)"""

    STORAGE_SCHEME = None  # not registered: created by TurnLimits, not from a URI

    def __init__(self) -> None:
        super().__init__()
        self._counts: Counts[str] = Counts()
        self._expires: dict[str, float] = {}
        self._by_expiry: list[tuple[float, str]] = []

    @property
    def base_exceptions(self) -> type[Exception]:
        return ValueError

    def _expire(self, now: float) -> None:
        while self._by_expiry and self._by_expiry[0][0] <= now:
            _, key = heapq.heappop(self._by_expiry)
            if self._expires.get(key, math.inf) <= now:
                del self._expires[key]
                self._counts.pop(key, None)

    async def incr(self, key: str, expiry: float, amount: int = 1) -> int:
        now = time.time()
        self._expire(now)
        if key not in self._expires:
            self._expires[key] = now + expiry
            heapq.heappush(self._by_expiry, (now + expiry, key))
        self._counts[key] += amount
        return self._counts[key]

    async def decr(self, key: str, amount: int = 1) -> int:
        if key in self._counts:  # an expired counter is not made again without its expiry
            self._counts[key] = max(self._counts[key] - amount, 0)
        return self._counts.get(key, 0)

    async def get(self, key: str) -> int:
        if self._expires.get(key, math.inf) <= time.time():
            return 0
        return self._counts.get(key, 0)

    async def get_expiry(self, key: str) -> float:
        return self._expires.get(key, time.time())

    async def check(self) -> bool:
        return True

    async def reset(self) -> int | None:
        count = len(self._counts)
        self._counts.clear()
        self._expires.clear()
        self._by_expiry.clear()
        return count

    async def clear(self, key: str) -> None:
        self._counts.pop(key, None)
        self._expires.pop(key, None)  # its heap entry is skipped when it comes up

    async def acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: int, amount: int = 1
    ) -> bool:
        if amount > limit:
            return False
        previous, previous_ttl, current, _ = await self.get_sliding_window(key, expiry)
        if math.floor(previous * previous_ttl / expiry + current) + amount > limit:
            return False
        _, current_key = self.sliding_window_keys(key, expiry, time.time())
        await self.incr(current_key, 2 * expiry, amount)  # one event loop step: no race
        return True

    async def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        """(previous window's count, its weight in seconds, current count, current TTL),
        as `limits`' strategy reads them."""
        now = time.time()
        previous_key, current_key = self.sliding_window_keys(key, expiry, now)
        previous = await self.get(previous_key)
        previous_ttl = (1 - (((now - expiry) / expiry) % 1)) * expiry if previous else 0.0
        current_ttl = (1 - ((now / expiry) % 1)) * expiry + expiry
        return previous, previous_ttl, await self.get(current_key), current_ttl

    async def clear_sliding_window(self, key: str, expiry: int) -> None:
        for window_key in self.sliding_window_keys(key, expiry, time.time()):
            await self.clear(window_key)


# The storages a hit can be given back to (see give_back).
GivingBackStorage = CounterStorage | MemoryStorage | RedisStorage


def shared_storage(url: str) -> MemoryStorage | RedisStorage:
    """The storage SUPPORTBOT_API__RATE_LIMIT_STORAGE_URL names."""
    return shared_limits_storage(url)(url)


async def give_back(storage: GivingBackStorage, key: str, expiry: int, amount: int) -> None:
    """Take `amount` off the current window of a sliding-window counter: a hit of a turn
    that was refused by a later limit, or tokens reserved beyond what a turn spent. A hit
    whose window has ended since went to the previous window, which then keeps it (in
    memory) or is given back in the current one (Redis)."""
    if isinstance(storage, RedisStorage):
        # limits' own name for the counter its hits go to; Redis keeps it past its window
        # until the next hit shifts it to the previous one
        await storage.incr(storage._current_window_key(key), 2 * expiry, -amount)
    else:
        _, current = storage.sliding_window_keys(key, expiry, time.time())
        await storage.decr(current, amount)


@dataclass
class Reservation:
    """What a turn holds of its caller's token budgets, from before it runs until it is
    settled with what it spent."""

    caller: str
    tokens: list[tuple[RateLimitItem, int]]  # each budget window and the tokens it holds
    settled: bool = False


class TurnLimits:
    """The turn rates of conversations and callers, and the callers' token budgets. Each
    limit is one atomic hit (`limits`' acquire), so concurrent turns of one caller never
    pass a window together; the hits a refused turn had taken are given back."""

    def __init__(
        self,
        settings: ApiSettings,
        metrics_enabled: bool = True,
        storage: GivingBackStorage | None = None,  # another storage, for app/bench
    ) -> None:
        if storage is None:
            url = settings.rate_limit_storage_url
            storage = shared_storage(url) if url else CounterStorage()
        self._storage = storage
        self._limiter = SlidingWindowCounterRateLimiter(self._storage)
        self._turns: dict[str, list[RateLimitItem]] = {
            "conversation": parse_many(settings.conversation_rate),
            "caller": parse_many(settings.caller_rate),
        }
        self._tokens = parse_many(settings.caller_token_budget)
        self._estimate = settings.turn_token_estimate
        self._metrics = metrics_enabled
        self._scripts_loaded = not isinstance(storage, RedisStorage)
        self._loading_scripts = asyncio.Lock()

    async def _load_scripts(self) -> None:
        """Load `limits`' Lua scripts into Redis before the first turn. A script the server
        does not know yet is refused (NOSCRIPT), and the client then drops the connection
        its concurrent commands share: they are sent again, and a hit that had been counted
        counts twice. (After the server restarts, its first concurrent turns may still.)"""
        async with self._loading_scripts:
            if self._scripts_loaded:
                return
            assert isinstance(self._storage, RedisStorage)
            bridge = self._storage.bridge
            assert isinstance(bridge, CoredisBridge)  # the client an async+redis:// URI makes
            for source in (bridge.SCRIPT_ACQUIRE_SLIDING_WINDOW, bridge.SCRIPT_SLIDING_WINDOW):
                await bridge.get_connection().script_load(source)
            self._scripts_loaded = True

    def _refuse(self, scope: str, reset_time: float, why: str) -> HTTPException:
        wait = max(1, math.ceil(reset_time - time.time()))
        if self._metrics:
            REFUSED.labels(scope=scope).inc()
        return HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"{why}; retry in {wait} s",
            headers={"Retry-After": str(wait)},
        )

    async def _give_back(self, item: RateLimitItem, scope: str, identity: str, cost: int) -> None:
        await give_back(self._storage, item.key_for(scope, identity), item.get_expiry(), cost)

    async def take(self, conversation_key: str, caller: str) -> Reservation:
        """Count one turn and reserve its estimated tokens, or raise 429 with Retry-After
        when a turn window is full or the caller's token budget has no room for the
        estimate (then nothing stays counted). A window smaller than the estimate is
        reserved whole."""
        wanted = [
            (item, scope, identity, 1)
            for scope, identity in (("conversation", conversation_key), ("caller", caller))
            for item in self._turns[scope]
        ] + [(item, "tokens", caller, min(self._estimate, item.amount)) for item in self._tokens]
        if not self._scripts_loaded:
            await self._load_scripts()
        taken: list[tuple[RateLimitItem, str, str, int]] = []
        try:
            for item, scope, identity, cost in wanted:
                if not await self._limiter.hit(item, scope, identity, cost=cost):
                    stats = await self._limiter.get_window_stats(item, scope, identity)
                    why = (
                        f"this caller's model token budget is spent ({item})"
                        if scope == "tokens"
                        else f"too many turns for this {scope} ({item})"
                    )
                    raise self._refuse(scope, stats.reset_time, why)
                taken.append((item, scope, identity, cost))
        except BaseException:  # refused, or the storage failed, or the request was cancelled
            for item, scope, identity, cost in taken:
                await self._give_back(item, scope, identity, cost)
            raise
        return Reservation(
            caller, [(item, cost) for item, scope, _, cost in taken if scope == "tokens"]
        )

    async def settle(self, reservation: Reservation, kind: str, tokens: int) -> None:
        """Replace a finished turn's reserved tokens by the `tokens` it spent. A turn may
        spend past its budget; the overshoot is not carried over (the window then counts as
        full)."""
        if self._metrics:
            CALLER_TOKENS.labels(kind=kind).inc(tokens)
        await self._replace(reservation, tokens)

    async def release(self, reservation: Reservation) -> None:
        """Give back what a turn reserved and did not settle: it failed, was refused, or its
        client left before its end (such a turn is not counted)."""
        await self._replace(reservation, 0)

    async def _replace(self, reservation: Reservation, tokens: int) -> None:
        if reservation.settled:
            return
        reservation.settled = True
        for item, held in reservation.tokens:
            if tokens < held:
                await self._give_back(item, "tokens", reservation.caller, held - tokens)
            elif tokens > held:
                stats = await self._limiter.get_window_stats(item, "tokens", reservation.caller)
                if (more := min(tokens - held, stats.remaining)) > 0:
                    await self._limiter.hit(item, "tokens", reservation.caller, cost=more)
