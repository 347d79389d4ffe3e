"""A turn's database work is two transactions: the first stores the user's message and
reads what the turn starts from (its context, the handoff state, the person's memory), the
second stores the answer, the calls, the memory's decisions and what the turn remembers.
Counted with SQLAlchemy's events on real engines, SQLite and PostgreSQL; reads that only
read do not queue for SQLite's write lock."""

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import Connection, event, func, make_url, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.agent.memory.profiles import SummaryPolicy
from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnRequest
from app.db import migrate
from app.db.engine import make_async_engine, make_session_factory
from app.db.models import MemoryItem, Summary
from app.handoff.service import HandoffService
from app.memory.scope import api_scope
from app.runtime import agent_factory
from app.settings import DbSettings, Settings
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever

QUESTIONS = [
    "Remember that our currency is CHF.",
    "How do I create an invoice?",
    "How do I record a partial payment?",
    "How do I set the VAT rate?",
    "How do I create an invoice for a new customer?",
    "How do I record a partial payment by card?",
]


@dataclass
class Counted:
    """What one turn sent to the database."""

    transactions: int = 0
    statements: list[str] = field(default_factory=list)


@contextmanager
def counting(engine: AsyncEngine) -> Iterator[list[Counted]]:
    """Each turn appends a `Counted` to the list it yields before it starts."""
    turns: list[Counted] = []

    def on_statement(_: Connection, __: Any, statement: str, *args: Any) -> None:
        turns[-1].statements.append(statement)
        if statement.startswith("BEGIN"):  # SQLite's: the app begins its own
            turns[-1].transactions += 1

    def on_begin(connection: Connection) -> None:
        # Autocommit (PostgreSQL's advisory lock) begins nothing on the server.
        autocommit = connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
        if engine.dialect.name != "sqlite" and not autocommit:
            turns[-1].transactions += 1

    event.listen(engine.sync_engine, "before_cursor_execute", on_statement)
    event.listen(engine.sync_engine, "begin", on_begin)
    try:
        yield turns
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", on_statement)
        event.remove(engine.sync_engine, "begin", on_begin)


async def test_a_turn_is_two_transactions_with_handoffs_memory_and_folds(
    settings: Settings, database_url: str
) -> None:
    # Folds from the third exchange on: a fold's summary and facts go in the second one.
    settings.profiles.definitions["client"].summary = SummaryPolicy(
        trigger_exchanges=2, keep_exchanges=1
    )
    assert "client" in settings.handoff.audiences and "client" in settings.memory.audiences
    engine = make_async_engine(DbSettings(url=database_url))
    turns = TurnStore(engine)
    agents = agent_factory(settings, CapturingChatModel(), KeywordRetriever(ARTICLES))
    service = ChatService(settings, turns, agents, handoffs=HandoffService(settings, turns))
    scope = api_scope("api:acme:", "p-1")
    try:
        with counting(engine) as counted:
            for question in QUESTIONS:
                counted.append(Counted())
                request = TurnRequest(
                    "api", "api:acme:1", "client", "Ann", question, memory_scope=scope
                )
                reply = await service.handle_turn(request)
                assert reply.outcome in ("answered", "not_found"), question  # the bot's
        async with make_session_factory(engine)() as session:
            folds = await session.scalar(select(func.count(Summary.id)))
            remembered = await session.scalar(select(func.count(MemoryItem.id)))
    finally:
        await engine.dispose()

    assert folds and remembered  # the turns folded and remembered
    assert [turn.transactions for turn in counted] == [2] * len(QUESTIONS)
    # The turn closes its own turn row, and no other: an earlier orphan is closed only when
    # there is one (the sweep of every turn's conversation is gone).
    updates = [sum(s.startswith("UPDATE turns") for s in turn.statements) for turn in counted]
    assert updates == [1] * len(QUESTIONS)


async def test_reads_do_not_wait_for_a_writer_on_sqlite(settings: Settings) -> None:
    """A writer holds SQLite's write lock (another process, say): the history, the usage
    and the handoff queue are still read, where a write would wait out the busy timeout."""
    migrate.upgrade(settings.db.url)
    db = DbSettings(url=settings.db.url, pool_timeout=0.5)
    engine = make_async_engine(db)
    turns = TurnStore.for_engine(engine, db)
    agents = agent_factory(settings, CapturingChatModel(), KeywordRetriever(ARTICLES))
    handoffs = HandoffService(settings, turns)
    service = ChatService(settings, turns, agents, handoffs=handoffs)
    await service.handle_turn(TurnRequest("api", "api:read", "client", "Ann", "Hello"))
    writer = sqlite3.connect(make_url(settings.db.url).database or "", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        history = await service.history("api:read")
        usage = await service.usage("api:read")
        queue = await handoffs.queue()
        async with turns.sessions() as session:  # a writer's session waits, then gives up
            with pytest.raises(Exception, match="locked"):
                await session.scalar(select(func.count(Summary.id)))
    finally:
        writer.rollback()
        writer.close()
        await engine.dispose()
    assert history is not None and len(history[1]) == 2
    assert usage is not None and queue == []
