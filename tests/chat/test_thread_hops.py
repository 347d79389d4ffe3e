"""What a turn hands to worker threads: the blocking work only (the decider's and the
search's embedding, the search), not LangSmith's set-up around every middleware hook,
which agents built while LangSmith tracing is off do not have (app/agent/lean.py)."""

import asyncio
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnRequest
from app.db import migrate
from app.db.engine import make_async_engine
from app.handoff.service import HandoffService
from app.runtime import agent_factory
from app.settings import Settings
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever


class CountingExecutor(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(max_workers=4)
        self.jobs: list[str] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.jobs.append(getattr(fn, "__qualname__", repr(fn)))
        return super().submit(fn, *args, **kwargs)


@contextmanager
def counted_jobs(loop: asyncio.AbstractEventLoop) -> Iterator[CountingExecutor]:
    executor = CountingExecutor()
    loop.set_default_executor(executor)
    try:
        yield executor
    finally:
        loop.set_default_executor(ThreadPoolExecutor())
        executor.shutdown()


async def test_a_turn_hands_only_its_blocking_work_to_threads(settings: Settings) -> None:
    migrate.upgrade(settings.db.url)
    engine = make_async_engine(settings.db)
    turns = TurnStore(engine)
    agents = agent_factory(settings, CapturingChatModel(), KeywordRetriever(ARTICLES))
    service = ChatService(settings, turns, agents, handoffs=HandoffService(settings, turns))
    ask = TurnRequest("api", "api:hops", "client", "Ann", "How do I create an invoice?")
    try:
        await service.handle_turn(ask)
        with counted_jobs(asyncio.get_running_loop()) as executor:
            await service.handle_turn(ask)
    finally:
        await engine.dispose()
    # The decider's look at the message and the search tool: LangChain runs a plain
    # function's tool on a thread, and hands a thread the creation of its run managers.
    assert len(executor.jobs) <= 6, executor.jobs  # 26 with LangSmith's own hops
