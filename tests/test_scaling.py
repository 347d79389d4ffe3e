"""Two replicas (two ChatService instances on two engines) share one PostgreSQL: turns of
one conversation are still handled one at a time, in order."""

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from sqlalchemy import select

from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnRequest
from app.db.engine import make_async_engine, make_session_factory
from app.db.models import Conversation, Message
from app.runtime import agent_factory
from app.settings import DbSettings, Settings
from bot.dedupe import claim_update
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever


class SlowModel(CapturingChatModel):
    """Widens the window in which two unserialized turns would interleave."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        time.sleep(0.05)
        return super()._generate(messages, *args, **kwargs)


@pytest.fixture
async def replicas(settings: Settings, own_pg_url: str) -> AsyncIterator[list[ChatService]]:
    engines = [make_async_engine(DbSettings(url=own_pg_url)) for _ in range(2)]
    services = [
        ChatService(
            settings,
            TurnStore(engine),
            agent_factory(settings, SlowModel(), KeywordRetriever(ARTICLES)),
        )
        for engine in engines
    ]
    yield services
    for engine in engines:
        await engine.dispose()


async def test_concurrent_turns_on_two_replicas_are_serialized(
    replicas: list[ChatService], own_pg_url: str
) -> None:
    key = f"scaling:{time.time_ns()}"
    questions = ["create an invoice", "record a payment", "VAT rates", "partial payment"]
    requests = [
        (replicas[i % 2], TurnRequest("api", key, "client", f"user{i}", question))
        for i, question in enumerate(questions * 2)
    ]
    replies = await asyncio.gather(*(service.handle_turn(r) for service, r in requests))
    assert sorted(reply.turn for reply in replies) == list(range(1, 9))

    reader = make_async_engine(DbSettings(url=own_pg_url))
    try:
        async with make_session_factory(reader)() as session:
            conversation = await session.scalar(select(Conversation).where(Conversation.key == key))
            assert conversation is not None
            messages = list(
                await session.scalars(
                    select(Message)
                    .where(Message.conversation_id == conversation.id)
                    .order_by(Message.seq)
                )
            )
    finally:
        await reader.dispose()
    # Every turn's messages are contiguous and complete: user, tool call, result, answer.
    turns = [m.turn for m in messages]
    assert turns == sorted(turns)
    for number in range(1, 9):
        roles = [m.role for m in messages if m.turn == number]
        assert roles == ["user", "assistant", "tool", "assistant"]
    by_turn = {reply.turn: reply.text for reply in replies}
    answers = [m for m in messages if m.role == "assistant" and not m.tool_calls]
    assert [m.content for m in answers] == [by_turn[n] for n in range(1, 9)]


async def test_a_telegram_update_is_claimed_once_across_replicas(own_pg_url: str) -> None:
    """Both replicas receive the same update at once (a webhook retry landing on the other
    replica): exactly one of them gets to handle it."""
    engines = [make_async_engine(DbSettings(url=own_pg_url)) for _ in range(2)]
    update_id = time.time_ns() % 2**62

    async def claim(engine: Any) -> bool:
        async with make_session_factory(engine)() as session:
            return await claim_update(session, bot_id=123456, update_id=update_id)

    try:
        claims = await asyncio.gather(*(claim(engine) for engine in engines * 3))
    finally:
        for engine in engines:
            await engine.dispose()
    assert sorted(claims) == [False] * 5 + [True]
