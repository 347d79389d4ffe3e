"""One turn at a time per conversation: an asyncio lock in this process and, on
PostgreSQL, a session advisory lock so that replicas serialize too."""

import asyncio
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from weakref import WeakValueDictionary

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine


def advisory_key(conversation_key: str) -> int:
    """A stable signed 64-bit id for pg_advisory_lock."""
    digest = hashlib.sha256(conversation_key.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class ConversationLocks:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._local: WeakValueDictionary[str, asyncio.Lock] = WeakValueDictionary()

    @asynccontextmanager
    async def hold(self, conversation_key: str) -> AsyncIterator[None]:
        lock = self._local.setdefault(conversation_key, asyncio.Lock())
        async with lock:
            if self._engine.dialect.name != "postgresql":
                yield
                return
            key = {"key": advisory_key(conversation_key)}
            async with self._engine.connect() as connection:
                await connection.execute(text("SELECT pg_advisory_lock(:key)"), key)
                try:
                    yield
                finally:
                    await connection.execute(text("SELECT pg_advisory_unlock(:key)"), key)
