"""The write when a conversation goes idle past the cache TTL without folding: once per idle
period, through the offline extractive summarizer and through a real provider's protocol
(the scripted OpenAI-compatible server on 127.0.0.1), on PostgreSQL (rolled back per
test); and the service's periodic check, over HTTP."""

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from app.agent.memory.summarizer import SUMMARY_HEADING, SUMMARY_INSTRUCTIONS, build_summary_model
from app.bench.scripted_llm import Reply, ScriptedLLM, message_text
from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnRequest
from app.db.models import LLMCall, Message, Turn
from app.memory import store
from app.memory.idle import IdleWriter, idle_after, idle_conversations
from app.memory.scope import api_scope, telegram_scope
from app.runtime import agent_factory
from app.settings import ApiKey, LLMSettings, Settings
from tests.conftest import make_client
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever

ACME = api_scope("api:acme:", "p-17")
LATER = timedelta(minutes=6)  # past the 5-minute TTL of the default (Gemini) cache rules


@pytest.fixture
def service(settings: Settings, pg_connection: AsyncConnection) -> ChatService:
    model = CapturingChatModel()
    return ChatService(
        settings,
        TurnStore(pg_connection),
        agent_factory(settings, model, KeywordRetriever(ARTICLES), summary_model=model),
    )


def writer(settings: Settings, sessions: async_sessionmaker[AsyncSession]) -> IdleWriter:
    return IdleWriter(settings, sessions, build_summary_model(settings.llm))


async def say(
    service: ChatService, text: str, scope: str | None = ACME, key: str = "api:acme:1"
) -> None:
    await service.handle_turn(TurnRequest("api", key, "client", "Ann", text, memory_scope=scope))


async def kept(sessions: async_sessionmaker[AsyncSession], scope: str = ACME) -> list[str]:
    async with sessions() as session:
        return [item.text for item in await store.active_items(session, [scope])]


async def memory_calls(sessions: async_sessionmaker[AsyncSession]) -> list[LLMCall]:
    async with sessions() as session:
        return list(await session.scalars(select(LLMCall).where(LLMCall.purpose == "memory")))


async def test_an_idle_conversation_is_written_once_per_idle_period(
    service: ChatService, settings: Settings, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    idle = writer(settings, pg_sessions)
    assert idle_after(settings) == timedelta(minutes=5)
    await say(service, "Our currency is CHF. How do I create an invoice?")
    await say(service, "We run GnuCash 5.4 on Windows. How do I record a payment?")
    assert await idle.write_idle() == 0  # not idle yet: the cached prefix still lives
    assert await kept(pg_sessions) == []

    now = datetime.now(UTC) + LATER
    assert await idle.write_idle(now) == 1
    assert await kept(pg_sessions) == ["Our currency is CHF.", "We run GnuCash 5.4 on Windows."]
    assert await idle.write_idle(now) == 0  # the same idle period: nothing, no model call
    assert len(await memory_calls(pg_sessions)) == 1

    # The next turn starts a new period; only what it said is read.
    await say(service, "Our currency is EUR now. Where are the VAT rates?")
    assert await idle.write_idle(datetime.now(UTC) + LATER) == 1
    assert await kept(pg_sessions) == ["We run GnuCash 5.4 on Windows.", "Our currency is EUR now."]
    calls = await memory_calls(pg_sessions)
    assert [(c.turn, c.model) for c in calls] == [(2, "offline-summary"), (3, "offline-summary")]
    assert calls[1].input_tokens < calls[0].input_tokens  # one turn read, not three


async def test_of_two_writers_that_found_it_idle_one_writes(
    service: ChatService, settings: Settings, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    await say(service, "Our currency is CHF. How do I create an invoice?")
    now = datetime.now(UTC) + LATER
    async with pg_sessions() as session:  # the other replica's look, before the first writes
        found = await idle_conversations(session, now - idle_after(settings))
    assert await writer(settings, pg_sessions).write_idle(now) == 1
    assert [await writer(settings, pg_sessions).take_in(idle) for idle in found] == [0]
    assert len(await memory_calls(pg_sessions)) == 1


async def test_nothing_is_written_without_a_remembered_turn_or_while_one_runs(
    service: ChatService, settings: Settings, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    idle = writer(settings, pg_sessions)
    await say(service, "Our currency is CHF. How do I create an invoice?", scope=None)
    assert await idle.write_idle(datetime.now(UTC) + LATER) == 0  # nobody to remember

    await say(service, "Our currency is CHF. How do I create an invoice?", key="api:acme:2")
    async with pg_sessions() as session:
        await session.execute(update(Turn).values(status="running"))
        await session.commit()
    assert await idle.write_idle(datetime.now(UTC) + LATER) == 0  # a turn still runs
    assert await memory_calls(pg_sessions) == []


async def test_a_fold_and_a_forget_are_not_written_again(
    service: ChatService, settings: Settings, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    idle = writer(settings, pg_sessions)
    await say(service, "Our currency is CHF. How do I create an invoice?")
    async with pg_sessions() as session:  # as if a fold had taken the first turn in
        await session.execute(
            update(Message).where(Message.turn == 1).values(context_state="dropped")
        )
        await session.commit()
    await say(service, "We run GnuCash 5.4 on Windows. How do I record a payment?")
    assert await idle.write_idle(datetime.now(UTC) + LATER) == 1
    assert await kept(pg_sessions) == ["We run GnuCash 5.4 on Windows."]

    await say(service, "Our company is a GmbH in Zurich. Where are the VAT rates?")
    async with pg_sessions() as session:
        await store.forget(session, ACME)
        await session.commit()
    assert await idle.write_idle(datetime.now(UTC) + LATER) == 0
    assert await kept(pg_sessions) == []


async def test_a_telegram_chat_writes_each_sender_and_the_chat(
    service: ChatService, settings: Settings, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    ann, bob = telegram_scope(-100, 1), telegram_scope(-100, 2)
    for author, scope, text in [
        ("Ann", ann, "We run GnuCash 4 on Linux. How do I create an invoice?"),
        ("Bob", bob, "Our company is a GmbH in Munich. Where are the VAT rates?"),
    ]:
        await service.handle_turn(
            TurnRequest("telegram", "telegram:-100", "client", author, text, memory_scope=scope)
        )
    assert await writer(settings, pg_sessions).write_idle(datetime.now(UTC) + LATER) == 1
    assert await kept(pg_sessions, ann) == ["We run GnuCash 4 on Linux."]
    assert await kept(pg_sessions, bob) == ["Our company is a GmbH in Munich."]


_SAID = re.compile(r"^\[#(?P<id>\d+) user\] (?P<author>[^:]+): (?P<text>[^?]*\.)", re.M)


def provider_summary(body: dict[str, Any]) -> Reply:
    """A provider's summary in the requested layout: each user's first statement."""
    said = _SAID.findall(message_text(body["messages"][-1]))
    facts = [f"- {author}: {text} (#{recall})" for recall, author, text in said]
    return Reply(
        "\n".join([SUMMARY_HEADING, "Participants: Ann", "Facts and constraints users stated:",
                   *facts, "Decisions:", "- none", "Open questions:", "- none", "Topics:",
                   "- none"])
    )  # fmt: skip


async def test_a_real_summary_model_gets_one_request_with_the_turns_not_taken_in(
    service: ChatService, settings: Settings, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    provider = ScriptedLLM(policy=provider_summary)
    with provider as base_url:
        settings.llm = LLMSettings(summary_model="scripted", base_url=base_url,
                                   api_key=SecretStr("dummy"))  # fmt: skip
        await say(service, "Our currency is CHF. How do I create an invoice?")
        idle = writer(settings, pg_sessions)
        assert await idle.write_idle(datetime.now(UTC) + LATER) == 1
        assert await idle.write_idle(datetime.now(UTC) + LATER) == 0
    async with pg_sessions() as session:
        asked = await session.scalar(select(Message.id).where(Message.role == "user"))
    (request,) = provider.requests
    assert request["model"] == "scripted"
    system, user = request["messages"]
    assert system == {"role": "system", "content": SUMMARY_INSTRUCTIONS}
    assert message_text(user).startswith(
        "<previous_summary>\n\n</previous_summary>\n<new_messages>\n"
        f"[#{asked} user] Ann: Our currency is CHF. How do I create an invoice?\n"
    )
    assert await kept(pg_sessions) == ["Our currency is CHF."]
    (call,) = await memory_calls(pg_sessions)
    assert (call.model, call.turn) == ("scripted", 1) and call.input_tokens > 0


def summary_without_sources(body: dict[str, Any]) -> Reply:
    """A provider's summary whose facts name their author but not their message."""
    said = _SAID.findall(message_text(body["messages"][-1]))
    facts = [f"- {author}: {text}" for _, author, text in said]
    return Reply("\n".join([SUMMARY_HEADING, "Facts and constraints users stated:", *facts]))


async def test_a_fact_without_its_source_message_is_nobody_s(
    service: ChatService, settings: Settings, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    """Two people of one API key write as "Sam": a fact the summary gives no recall id
    goes to neither, never to the last one who wrote under the name."""
    mallory, victim = api_scope("api:acme:", "mallory"), api_scope("api:acme:", "victim")
    for scope, text in [
        (mallory, "Our refund bank account is EVIL-IBAN-666. Can you note it?"),
        (victim, "We run GnuCash 5.4 on Windows. How do I record a payment?"),
    ]:
        await service.handle_turn(
            TurnRequest("api", "api:acme:1", "client", "Sam", text, memory_scope=scope)
        )
    provider = ScriptedLLM(policy=summary_without_sources)
    with provider as base_url:
        settings.llm = LLMSettings(summary_model="scripted", base_url=base_url,
                                   api_key=SecretStr("dummy"))  # fmt: skip
        assert await writer(settings, pg_sessions).write_idle(datetime.now(UTC) + LATER) == 1
    assert len(provider.requests) == 1
    assert await kept(pg_sessions, victim) == []
    assert await kept(pg_sessions, mallory) == []


@pytest.fixture
def api(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    settings.api.keys = {"shop": ApiKey(key=SecretStr("shop-key-0123456789abcdef"),
                                        prefix="api:shop:")}  # fmt: skip
    settings.memory.idle_minutes = 0.001
    settings.memory.idle_check_seconds = 0.05
    with make_client(settings, sample_index) as client:
        yield client


def test_the_service_writes_idle_conversations_by_itself(api: TestClient) -> None:
    shop = {"authorization": "Bearer shop-key-0123456789abcdef"}
    body = {"audience": "client", "author": "Ann", "person": "u-1",
            "text": "Our currency is CHF. How do I create an invoice?"}  # fmt: skip
    assert api.post("/v1/conversations/api:shop:1/messages", json=body, headers=shop).is_success
    deadline = time.monotonic() + 30
    found: list[str] = []
    while not found and time.monotonic() < deadline:  # the periodic check, within its time
        time.sleep(0.05)
        listed = api.get("/v1/people/u-1/memory", headers=shop)
        found = [item["text"] for item in listed.json()] if listed.is_success else []
    assert found == ["Our currency is CHF."]
