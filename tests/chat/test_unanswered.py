"""Failed turns' questions reach the next turn as one note, in the same place every turn
after (PostgreSQL, rolled back per test; the model records what it receives)."""

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from app.chat.context import UNANSWERED_NOTE
from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnFailed, TurnRequest
from app.db.models import Message, Turn
from app.runtime import agent_factory
from app.settings import Settings
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever

pytestmark = pytest.mark.postgres


def ask(author: str, text: str) -> TurnRequest:
    return TurnRequest("telegram", "test:unanswered", "client", author, text)


def kinds(messages: list[BaseMessage]) -> list[tuple[str, Any]]:
    """Human and system messages with their text; the rest by kind."""
    return [
        (m.type, None if isinstance(m, AIMessage | ToolMessage) else m.content) for m in messages
    ]


def described(messages: list[BaseMessage]) -> list[tuple[str, Any, Any]]:
    """Everything a provider is sent of each message (ids are ours, not sent)."""
    return [(m.type, m.content, getattr(m, "tool_calls", None)) for m in messages]


async def test_failed_turns_reach_the_next_turn_as_one_note(
    settings: Settings,
    pg_connection: AsyncConnection,
    pg_sessions: async_sessionmaker[AsyncSession],
) -> None:
    model = CapturingChatModel()
    service = ChatService(
        settings,
        TurnStore(pg_connection),
        agent_factory(settings, model, KeywordRetriever(ARTICLES)),
    )
    await service.handle_turn(ask("Ann", "How do I create an invoice?"))
    model.fail_with = "503 upstream unavailable"
    for author, question in [("Bob", "How do I record a payment?"), ("Ann", "And VAT?")]:
        with pytest.raises(TurnFailed):
            await service.handle_turn(ask(author, question))
    model.fail_with = None
    calls_before = len(model.calls)
    await service.handle_turn(ask("Ann", "Where do I set the VAT rates?"))

    first_exchange = [
        ("system", settings.chat.system_prompt),
        ("human", "Ann: How do I create an invoice?"),
        ("ai", None),
        ("tool", None),
        ("ai", None),
    ]
    note = f"{UNANSWERED_NOTE}\nBob: How do I record a payment?\nAnn: And VAT?"
    received = model.calls[calls_before].messages
    assert kinds(received) == [
        *first_exchange,
        ("human", note),
        ("human", "Ann: Where do I set the VAT rates?"),
    ]

    calls_before = len(model.calls)
    await service.handle_turn(ask("Bob", "Thanks. How do I record a payment?"))
    received_next = model.calls[calls_before].messages
    # The earlier turn's request, note included, is an unchanged prefix of this one.
    assert described(received_next)[: len(received)] == described(received)
    assert kinds(received_next)[len(first_exchange)] == ("human", note)
    assert kinds(received_next)[-1] == ("human", "Bob: Thanks. How do I record a payment?")

    async with pg_sessions() as session:  # the transcript keeps every message as it was
        statuses = list(await session.scalars(select(Turn.status).order_by(Turn.number)))
        users = list(
            await session.scalars(
                select(Message.content).where(Message.role == "user").order_by(Message.seq)
            )
        )
    assert statuses == ["ok", "failed", "failed", "ok", "ok"]
    assert users[1:3] == ["How do I record a payment?", "And VAT?"]
