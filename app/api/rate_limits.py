"""How many turns a conversation and an author may take over HTTP (the `limits` library,
moving windows, in this process's memory: with several replicas each counts its own)."""

import math
import time

from fastapi import HTTPException, status
from limits import RateLimitItem, parse_many
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter

from app.settings import ApiSettings


class TurnRateLimits:
    def __init__(self, settings: ApiSettings) -> None:
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._windows: dict[str, list[RateLimitItem]] = {
            "conversation": parse_many(settings.conversation_rate),
            "author": parse_many(settings.author_rate),
        }

    async def take(self, conversation_key: str, author: str) -> None:
        """Count one turn, or raise 429 with Retry-After when a window is full (then
        nothing is counted)."""
        checks = [
            (item, scope, identity)
            for scope, identity in (("conversation", conversation_key), ("author", author))
            for item in self._windows[scope]
        ]
        for item, scope, identity in checks:
            if not await self._limiter.test(item, scope, identity):
                stats = await self._limiter.get_window_stats(item, scope, identity)
                wait = max(1, math.ceil(stats.reset_time - time.time()))
                raise HTTPException(
                    status.HTTP_429_TOO_MANY_REQUESTS,
                    f"too many turns for this {scope} ({item}); retry in {wait} s",
                    headers={"Retry-After": str(wait)},
                )
        for item, scope, identity in checks:
            await self._limiter.hit(item, scope, identity)
