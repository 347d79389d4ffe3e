"""How many turns a conversation and a caller may take over HTTP, and how many model tokens
a caller may spend (the `limits` library, sliding-window counters).

A caller is its credential: an API key, a staff member, or, for an anonymous client, its
address; never the `author` a body names. The counters live in this process's memory
(`CounterStorage`), or in a shared `limits` storage (Redis, Memcached, MongoDB) named by
SUPPORTBOT_API__RATE_LIMIT_STORAGE_URL, so that replicas count together."""

import heapq
import math
import time
from collections import Counter as Counts

from fastapi import HTTPException, status
from limits import RateLimitItem, parse_many
from limits.aio.storage import SlidingWindowCounterSupport, Storage
from limits.aio.strategies import RateLimiter, SlidingWindowCounterRateLimiter
from limits.storage import storage_from_string
from limits.storage.base import TimestampedSlidingWindow
from prometheus_client import Counter

from app.observability.metrics import REGISTRY
from app.settings import ApiSettings

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
        self._counts[key] = max(self._counts[key] - amount, 0)
        return self._counts[key]

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


def shared_storage(url: str) -> Storage:
    """The `limits` storage a URI names, if it is an async one with sliding windows."""
    storage = storage_from_string(url)
    if not isinstance(storage, Storage) or not isinstance(storage, SlidingWindowCounterSupport):
        raise ValueError(
            f"{url!r} is not an async `limits` storage with sliding window counters "
            "(e.g. async+redis://host:6379/0)"
        )
    return storage


class TurnLimits:
    """The turn rates of conversations and callers, and the callers' token budgets."""

    def __init__(
        self,
        settings: ApiSettings,
        metrics_enabled: bool = True,
        limiter: RateLimiter | None = None,  # another strategy or storage, for app/bench
    ) -> None:
        url = settings.rate_limit_storage_url
        storage = shared_storage(url) if url else CounterStorage()
        self._limiter = limiter or SlidingWindowCounterRateLimiter(storage)
        self._turns: dict[str, list[RateLimitItem]] = {
            "conversation": parse_many(settings.conversation_rate),
            "caller": parse_many(settings.caller_rate),
        }
        self._tokens = parse_many(settings.caller_token_budget)
        self._metrics = metrics_enabled

    def _refuse(self, scope: str, reset_time: float, why: str) -> HTTPException:
        wait = max(1, math.ceil(reset_time - time.time()))
        if self._metrics:
            REFUSED.labels(scope=scope).inc()
        return HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"{why}; retry in {wait} s",
            headers={"Retry-After": str(wait)},
        )

    async def take(self, conversation_key: str, caller: str) -> None:
        """Count one turn, or raise 429 with Retry-After when a turn window is full or the
        caller's token budget is spent (then nothing is counted)."""
        checks = [
            (item, scope, identity)
            for scope, identity in (("conversation", conversation_key), ("caller", caller))
            for item in self._turns[scope]
        ]
        for item, scope, identity in checks:
            if not await self._limiter.test(item, scope, identity):
                stats = await self._limiter.get_window_stats(item, scope, identity)
                why = f"too many turns for this {scope} ({item})"
                raise self._refuse(scope, stats.reset_time, why)
        for item in self._tokens:
            if not await self._limiter.test(item, "tokens", caller):
                stats = await self._limiter.get_window_stats(item, "tokens", caller)
                why = f"this caller's model token budget is spent ({item})"
                raise self._refuse("tokens", stats.reset_time, why)
        for item, scope, identity in checks:
            await self._limiter.hit(item, scope, identity)

    async def spend(self, caller: str, kind: str, tokens: int) -> None:
        """Count a finished turn's model tokens against the caller's budget. The budget is
        checked before a turn, so the turn that spends it may go past it; the overshoot is
        not carried over (the window then counts as full)."""
        if self._metrics:
            CALLER_TOKENS.labels(kind=kind).inc(tokens)
        for item in self._tokens:
            remaining = (await self._limiter.get_window_stats(item, "tokens", caller)).remaining
            if min(tokens, remaining) > 0:
                await self._limiter.hit(item, "tokens", caller, cost=min(tokens, remaining))
