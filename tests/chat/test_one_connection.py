"""A turn holds exactly one pooled connection on PostgreSQL: many conversations share a small
pool, and the recall tool reads through the turn's own connection. (Replicas still take
one conversation's turns one at a time: tests/test_scaling.py.)"""

import asyncio
import time

import pytest
from langchain_core.messages import AIMessage
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnRequest
from app.db.engine import async_url, make_async_engine, make_session_factory
from app.db.models import Conversation, Message, Turn
from app.runtime import agent_factory
from app.settings import DbSettings, ProfilesSettings, Settings
from tests.chat.fakes import SlowModel, TwoRecallsModel
from tests.fakes import ARTICLES, KeywordRetriever

pytestmark = pytest.mark.postgres

QUESTIONS = ["How do I create an invoice?", "How do I record a partial payment?"]


async def turn_statuses(engine: AsyncEngine, prefix: str) -> dict[str, int]:
    async with make_session_factory(engine)() as session:
        rows = await session.execute(
            select(Turn.status, func.count(Turn.id))
            .join(Conversation, Conversation.id == Turn.conversation_id)
            .where(Conversation.key.startswith(prefix))
            .group_by(Turn.status)
        )
        return {status: count for status, count in rows.all()}


async def user_messages(engine: AsyncEngine, prefix: str) -> int:
    async with make_session_factory(engine)() as session:
        count = await session.scalar(
            select(func.count(Message.id))
            .join(Conversation, Conversation.id == Message.conversation_id)
            .where(Conversation.key.startswith(prefix), Message.role == "user")
        )
        return count or 0


async def test_twenty_conversations_on_a_pool_of_five_are_all_answered(
    settings: Settings, own_pg_url: str
) -> None:
    # No overflow, and a short wait, so that a pool that runs dry fails the test quickly.
    small_pool = DbSettings(url=own_pg_url, pool_size=5, max_overflow=0, pool_timeout=5)
    engine = make_async_engine(small_pool)
    agents = agent_factory(settings, SlowModel(), KeywordRetriever(ARTICLES))
    service = ChatService(settings, TurnStore.for_engine(engine, small_pool), agents)
    prefix = f"pool:{time.time_ns()}:"

    async def converse(n: int) -> list[int]:
        replies = [
            await service.handle_turn(TurnRequest("api", f"{prefix}{n}", "client", f"u{n}", q))
            for q in QUESTIONS
        ]
        return [reply.turn for reply in replies if reply.text]

    try:
        answered = await asyncio.gather(*(converse(n) for n in range(20)))
        assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]  # every turn gave its connection back
        assert await turn_statuses(engine, prefix) == {"ok": 40}
        assert await user_messages(engine, prefix) == 40
    finally:
        await engine.dispose()

    assert answered == [[1, 2]] * 20


async def test_recall_reads_through_the_turns_own_connection(
    settings: Settings, own_pg_url: str
) -> None:
    """One connection in the pool and one turn slot: were the recall tool to open a second
    connection, it would wait for the pool and the turn would fail; its two calls in one
    step take turns on the connection."""
    clearing = {
        "description": "clear every result",
        "clearing": {"trigger_tokens": 0, "keep": 0, "clear_at_least": 0},
    }
    settings.profiles = ProfilesSettings(
        by_audience={"client": "clearing", "staff": "clearing"},
        definitions={"clearing": clearing},
    )
    engine = create_async_engine(async_url(own_pg_url), pool_size=1, max_overflow=0, pool_timeout=2)
    model = TwoRecallsModel()
    service = ChatService(
        settings,
        TurnStore(engine, turn_slots=1),
        agent_factory(settings, model, KeywordRetriever(ARTICLES)),
    )
    key = f"recall:{time.time_ns()}"
    try:
        for question in QUESTIONS:  # the second turn clears the first one's search result
            await service.handle_turn(TurnRequest("api", key, "client", "Ann", question))
        reply = await service.handle_turn(TurnRequest("api", key, "client", "Ann", "recall: Sales"))
    finally:
        await engine.dispose()

    step = next(m for m in reversed(model.calls[-1].messages) if isinstance(m, AIMessage))
    assert [call["name"] for call in step.tool_calls] == ["recall_history"] * 2
    first, second = reply.text.split("\n---\n")
    assert first == second and "Sales → Invoices → New invoice" in first
