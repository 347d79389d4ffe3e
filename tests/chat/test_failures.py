"""Every failure after the user's message is stored ends the turn `failed` or `interrupted`,
tells the caller so, and keeps the message (PostgreSQL, rolled back per test)."""

import asyncio

import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import (
    FAILED_KEPT,
    INTERRUPTED_KEPT,
    TurnError,
    TurnFailed,
    TurnRequest,
    TurnStarted,
    TurnToken,
)
from app.db.models import LLMCall, Message, Turn
from app.runtime import agent_factory
from app.settings import Settings
from tests.chat.fakes import BlockingModel
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever

pytestmark = pytest.mark.postgres

QUESTION = TurnRequest("api", "test:faults", "client", "Ann", "How do I create an invoice?")

REFUSE_ANSWERS = [
    """CREATE FUNCTION refuse_answers() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN RAISE EXCEPTION 'could not extend file: No space left on device'; END $$""",
    """CREATE TRIGGER refuse_answers BEFORE INSERT ON messages FOR EACH ROW
       WHEN (NEW.role <> 'user') EXECUTE FUNCTION refuse_answers()""",
]


def service_with(
    settings: Settings, connection: AsyncConnection, model: CapturingChatModel
) -> ChatService:
    agents = agent_factory(settings, model, KeywordRetriever(ARTICLES))
    return ChatService(settings, TurnStore(connection), agents)


async def stored(sessions: async_sessionmaker[AsyncSession]) -> tuple[Turn, list[Message]]:
    async with sessions() as session:
        turn = await session.scalar(select(Turn))
        messages = list(await session.scalars(select(Message).order_by(Message.seq)))
    assert turn is not None
    return turn, messages


async def test_a_database_failure_after_the_message_is_stored_fails_the_turn(
    settings: Settings,
    pg_connection: AsyncConnection,
    pg_sessions: async_sessionmaker[AsyncSession],
) -> None:
    for statement in REFUSE_ANSWERS:  # the answer cannot be stored; the question can
        await pg_connection.execute(text(statement))
    service = service_with(settings, pg_connection, CapturingChatModel())

    events = [event async for event in service.stream_turn(QUESTION)]

    assert events[0] == TurnStarted("test:faults", 1)
    assert all(isinstance(e, TurnToken) for e in events[1:-1]) and len(events) > 2
    assert events[-1] == TurnError("test:faults", 1, "failed", True, FAILED_KEPT)
    turn, messages = await stored(pg_sessions)
    assert [(m.role, m.content) for m in messages] == [("user", QUESTION.text)]
    assert turn.status == "failed" and turn.finished_at is not None
    assert turn.error is not None and "No space left on device" in turn.error
    async with pg_sessions() as session:  # what the model was paid for is still counted
        assert len(list(await session.scalars(select(LLMCall)))) == 2


async def test_the_stored_error_has_no_secrets(
    settings: Settings,
    pg_connection: AsyncConnection,
    pg_sessions: async_sessionmaker[AsyncSession],
) -> None:
    key = "sk-or-v1-0123456789abcdef0123456789abcdef"
    model = CapturingChatModel(fail_with=f"401: invalid key {key} (Authorization: Bearer {key})")
    with pytest.raises(TurnFailed) as failed:
        await service_with(settings, pg_connection, model).handle_turn(QUESTION)

    assert failed.value.error.status == "failed" and failed.value.detail == FAILED_KEPT
    turn, messages = await stored(pg_sessions)
    assert turn.error is not None and "[REDACTED]" in turn.error and key not in turn.error
    assert [m.role for m in messages] == ["user"]


async def test_a_turn_past_its_deadline_is_interrupted(
    settings: Settings,
    pg_connection: AsyncConnection,
    pg_sessions: async_sessionmaker[AsyncSession],
) -> None:
    settings.chat.turn_timeout_seconds = 0.2
    model = BlockingModel()  # answers only when released, after the deadline
    try:
        with pytest.raises(TurnFailed) as failed:
            await service_with(settings, pg_connection, model).handle_turn(QUESTION)
    finally:
        model.release.set()

    assert failed.value.error == TurnError("test:faults", 1, "interrupted", True, INTERRUPTED_KEPT)
    turn, messages = await stored(pg_sessions)
    assert turn.status == "interrupted" and [m.role for m in messages] == ["user"]


async def test_a_shutdown_interrupts_the_turns_still_running(
    settings: Settings,
    pg_connection: AsyncConnection,
    pg_sessions: async_sessionmaker[AsyncSession],
) -> None:
    model = BlockingModel()
    service = service_with(settings, pg_connection, model)
    turn_task = asyncio.create_task(service.handle_turn(QUESTION))
    try:
        await asyncio.to_thread(model.called.wait, 10)
        await service.aclose()
        with pytest.raises(TurnFailed) as failed:
            await turn_task
    finally:
        model.release.set()

    assert failed.value.error.status == "interrupted" and failed.value.error.message_kept
    turn, messages = await stored(pg_sessions)
    assert turn.status == "interrupted" and [m.role for m in messages] == ["user"]


async def test_a_caller_that_stops_listening_does_not_lose_the_answer(
    settings: Settings,
    pg_connection: AsyncConnection,
    pg_sessions: async_sessionmaker[AsyncSession],
) -> None:
    service = service_with(settings, pg_connection, CapturingChatModel())
    events = service.stream_turn(QUESTION)
    assert isinstance(await anext(events), TurnStarted)
    await events.aclose()  # a client that disconnected after the message was stored
    # The next turn waits for the conversation: by then the first one has ended.
    second = await service.handle_turn(QUESTION)

    assert second.turn == 2
    async with pg_sessions() as session:
        turns = list(await session.scalars(select(Turn).order_by(Turn.number)))
        roles = list(await session.scalars(select(Message.role).order_by(Message.seq)))
    assert [t.status for t in turns] == ["ok", "ok"]
    assert roles == ["user", "assistant", "tool", "assistant"] * 2
