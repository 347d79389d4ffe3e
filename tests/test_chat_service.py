"""ChatService end to end on PostgreSQL (rolled back per test), with a capturing model."""

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from app.chat.context import UNANSWERED_NOTE
from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import FAILED_KEPT, ImageInput, InvalidTurn, TurnFailed, TurnRequest
from app.db import queries
from app.db.models import LLMCall, Message, Turn
from app.runtime import agent_factory
from app.settings import Settings
from knowledge.format import format_passages
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever


def described(messages: list[BaseMessage]) -> list[tuple[str, Any]]:
    """A message list as (kind, payload) pairs, to compare requests exactly."""
    rows: list[tuple[str, Any]] = []
    for m in messages:
        if isinstance(m, AIMessage) and m.tool_calls:
            rows.append(("ai_tool_call", [(c["name"], c["args"]) for c in m.tool_calls]))
        elif isinstance(m, ToolMessage):
            rows.append(("tool", m.content))
        else:
            rows.append((m.type, m.content))
    return rows


@pytest.fixture
def model() -> CapturingChatModel:
    return CapturingChatModel()


@pytest.fixture
def retriever() -> KeywordRetriever:
    return KeywordRetriever(ARTICLES)


@pytest.fixture
def service(
    settings: Settings,
    pg_connection: AsyncConnection,
    model: CapturingChatModel,
    retriever: KeywordRetriever,
) -> ChatService:
    # The tool's results as sent: the client profile's result policy is tests/memory's.
    settings.profiles.definitions["client"].results = None
    return ChatService(
        settings, TurnStore(pg_connection), agent_factory(settings, model, retriever)
    )


def ask(text: str, author: str = "Ann", audience: str = "client") -> TurnRequest:
    return TurnRequest("api", "test:chat", audience, author, text)


def search_result(settings: Settings, retriever: KeywordRetriever, query: str) -> str:
    k, budget = settings.knowledge.top_k, settings.knowledge.result_token_budget
    return format_passages(query, retriever.search(query, k), budget)


async def test_three_turns_send_exactly_the_growing_transcript(
    service: ChatService, model: CapturingChatModel, settings: Settings
) -> None:
    questions = [
        ("Ann", "How do I create an invoice?"),
        ("Bob", "How do I record a partial payment?"),
        ("Ann", "Where do I set the VAT rates?"),
    ]
    replies = [await service.handle_turn(ask(text, author)) for author, text in questions]

    oracle = KeywordRetriever(ARTICLES)
    system = ("system", settings.chat.system_prompt)
    transcript: list[tuple[str, Any]] = [system]
    assert len(model.calls) == 6  # per turn: one call that searches, one that answers
    for turn, ((author, text), reply) in enumerate(zip(questions, replies, strict=True)):
        first, second = model.calls[2 * turn], model.calls[2 * turn + 1]
        transcript.append(("human", f"{author}: {text}"))
        assert described(first.messages) == transcript
        assert [tool["function"]["name"] for tool in first.tools] == ["search_knowledge_base"]
        transcript += [
            ("ai_tool_call", [("search_knowledge_base", {"query": text})]),
            ("tool", search_result(settings, oracle, text)),
        ]
        assert described(second.messages) == transcript
        transcript.append(("ai", reply.text))

    assert isinstance(model.calls[0].messages[0], SystemMessage)
    assert isinstance(model.calls[-1].messages[-2], AIMessage)
    assert replies[0].citations[0].source == "en/create-invoice.md"
    assert replies[1].citations[0].source == "en/record-payment.md"
    assert "Settings → Taxes" in replies[2].text
    assert [r.turn for r in replies] == [1, 2, 3]


async def test_usage_of_every_call_is_stored(
    service: ChatService, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    reply = await service.handle_turn(ask("How do I create an invoice?"))

    async with pg_sessions() as session:
        calls = list(await session.scalars(select(LLMCall).order_by(LLMCall.id)))
    assert [c.purpose for c in calls] == ["agent", "agent"]
    assert all(c.input_tokens > 0 and c.output_tokens > 0 for c in calls)
    assert calls[1].input_tokens > calls[0].input_tokens  # the search result was added
    assert reply.usage.llm_calls == 2
    assert reply.usage.input_tokens == sum(c.input_tokens for c in calls)


async def test_failed_turn_keeps_the_user_message(
    service: ChatService, model: CapturingChatModel, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    model.fail_with = "provider unavailable"
    with pytest.raises(TurnFailed) as failed:
        await service.handle_turn(ask("How do I create an invoice?"))
    assert failed.value.error.message_kept and failed.value.detail == FAILED_KEPT

    async with pg_sessions() as session:
        messages = list(await session.scalars(select(Message)))
        turn = await session.scalar(select(Turn))
    assert [(m.role, m.author, m.content) for m in messages] == [
        ("user", "Ann", "How do I create an invoice?")
    ]
    assert turn is not None and turn.status == "failed"
    assert turn.error is not None and "provider unavailable" in turn.error

    model.fail_with = None  # the next turn sees the kept question, as a note, and answers
    reply = await service.handle_turn(ask("Sorry, again: how do I create an invoice?"))
    assert reply.turn == 2
    human = [m for m in model.calls[-1].messages if isinstance(m, HumanMessage)]
    assert [m.content for m in human] == [
        f"{UNANSWERED_NOTE}\nAnn: How do I create an invoice?",
        "Ann: Sorry, again: how do I create an invoice?",
    ]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (ask("   "), "the message is empty"),
        (ask("x" * 8193), "the message has 8193 characters; the limit is 8192"),
        (ask("hello", audience="vip"), "unknown audience 'vip': use one of staff, client"),
    ],
)
async def test_bad_input_is_refused_and_nothing_stored(
    service: ChatService,
    model: CapturingChatModel,
    pg_sessions: async_sessionmaker[AsyncSession],
    request_: TurnRequest,
    message: str,
) -> None:
    with pytest.raises(InvalidTurn, match=message):
        await service.handle_turn(request_)
    async with pg_sessions() as session:
        assert await session.scalar(select(func.count(Message.id))) == 0
    assert model.calls == []


async def test_images_reach_the_model_in_their_turn_only(
    service: ChatService, model: CapturingChatModel
) -> None:
    photo = ImageInput(b"\x89PNG fake", "image/png")
    await service.handle_turn(
        TurnRequest("telegram", "test:chat", "client", "Ann", "What is this error?", (photo,))
    )
    first = model.calls[0].messages[-1]
    assert first.content == [
        {"type": "text", "text": "Ann: What is this error? [image]"},
        {"type": "image", "base64": "iVBORyBmYWtl", "mime_type": "image/png"},
    ]
    await service.handle_turn(ask("And how do I create an invoice?"))
    earlier = next(m for m in model.calls[-1].messages if isinstance(m, HumanMessage))
    assert earlier.content == "Ann: What is this error? [image]"


async def test_reset_starts_a_fresh_context_and_keeps_the_archive(
    service: ChatService,
    model: CapturingChatModel,
    settings: Settings,
    pg_sessions: async_sessionmaker[AsyncSession],
) -> None:
    assert not await service.reset_context("test:chat")
    await service.handle_turn(ask("How do I create an invoice?"))
    async with pg_sessions() as session:  # as if memory had folded the first exchange
        conversation = await queries.get_conversation(session, "test:chat")
        assert conversation is not None
        first = (await queries.all_messages(session, conversation))[0]
        await queries.add_summary(session, conversation, "Ann uses Ledgerly.", first.id, "x", 5)
        await session.commit()
    assert await service.reset_context("test:chat")
    await service.handle_turn(ask("Where do I set the VAT rates?", author="Bob"))

    assert described(model.calls[-2].messages) == [
        ("system", settings.chat.system_prompt),
        ("human", "Bob: Where do I set the VAT rates?"),
    ]
    found = await service.history("test:chat")
    assert found is not None
    assert len(found[1]) == 8  # both turns stay in the archive
