"""What Langfuse receives equals what the service stores: the SDK's real export, captured by
a fake Langfuse on 127.0.0.1, for a 30-turn offline client conversation (simulated cache)
and for an OpenAI-compatible provider that reports cached tokens (the scripted server)."""

import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_openai import ChatOpenAI
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from app.bench.scripted_llm import ScriptedLLM
from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnFailed, TurnRequest
from app.db.models import Conversation, LLMCall, Turn
from app.observability.simulator import RULES, PrefixCacheSimulator
from app.observability.tracing import Tracer
from app.runtime import agent_factory
from app.settings import ProfilesSettings, Settings
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever

from .conftest import LocalServer, exported_scores, exported_spans
from .test_tracing import langfuse_settings

USAGE = "langfuse.observation.usage_details"
COST = "langfuse.observation.cost_details"
MAX_CHARS = 2000
QUESTIONS = [
    "How do I create an invoice for a customer?",
    "How do I record a partial payment?",
    "Where do I set the VAT rates?",
    "Can a customer override the default VAT rate?",
    "Are drafts of invoices kept until I send them?",
]
TRACE_METADATA = "langfuse.trace.metadata."


def chat_settings(base: Settings, server: LocalServer, **langfuse: Any) -> Settings:
    """Clearing and folding early, so a 30-turn chat does both several times; the
    simulator caching prefixes as short as these contexts."""
    return base.model_copy(
        update={
            "observability": base.observability.model_copy(update={"simulator_rules": "block16"}),
            "langfuse": langfuse_settings(server, max_attribute_chars=MAX_CHARS, **langfuse),
            "profiles": ProfilesSettings(
                definitions={
                    "client": {
                        "clearing": {"trigger_tokens": 400, "keep": 2, "clear_at_least": 150},
                        "summary": {"trigger_tokens": 1500, "keep_exchanges": 2},
                    }
                }
            ),
        }
    )


async def converse(
    settings: Settings,
    connection: AsyncConnection,
    model: BaseChatModel,
    turns: int,
    *,
    flush: bool = True,
) -> tuple[Tracer, ChatService, str]:
    tracer = Tracer.from_settings(settings)
    service = ChatService(
        settings,
        TurnStore(connection),
        agent_factory(settings, model, KeywordRetriever(ARTICLES)),
        tracer=tracer,
        simulator=PrefixCacheSimulator(RULES[settings.observability.simulator_rules]),
    )
    key = "telegram:-100:equality"
    try:
        for number in range(turns):
            author = ("Ann", "Bob", "Cleo")[number % 3]
            text = QUESTIONS[number % len(QUESTIONS)]
            await service.handle_turn(TurnRequest("telegram", key, "client", author, text))
    finally:
        if flush:
            tracer.flush()
    return tracer, service, key


async def _stored(sessions: async_sessionmaker[AsyncSession], key: str) -> dict[str, list[LLMCall]]:
    """The stored calls by the trace id of their turn."""
    async with sessions() as session:
        rows = await session.execute(
            select(Turn.trace_id, LLMCall)
            .join(Conversation, Conversation.id == Turn.conversation_id)
            .join(
                LLMCall,
                (LLMCall.conversation_id == Turn.conversation_id) & (LLMCall.turn == Turn.number),
            )
            .where(Conversation.key == key)
            .order_by(LLMCall.id)
        )
    calls: dict[str, list[LLMCall]] = defaultdict(list)
    for trace_id, call in rows:
        assert trace_id is not None  # every turn is traced
        calls[trace_id].append(call)
    return calls


def _exported(server: LocalServer) -> dict[str, list[dict[str, Any]]]:
    generations: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in exported_spans(server):
        if span.get("langfuse.observation.type") == "generation":
            generations[span["trace_id"]].append(span)
    return generations


def _figures(input_tokens: int, cached: int, output: int, cost: float) -> tuple[Any, ...]:
    return (input_tokens, cached, output, round(cost, 2), pytest.approx(cost, abs=1e-12))


def _langfuse_figures(generations: list[dict[str, Any]]) -> tuple[Any, ...]:
    usage = [json.loads(g[USAGE]) for g in generations]
    # An unpriced model's generation has no cost (its database row says 0).
    cost = sum(json.loads(g[COST])["total"] for g in generations if COST in g)
    return (
        sum(u["input"] + u["input_cache_read"] + u["input_cache_creation"] for u in usage),
        sum(u["input_cache_read"] for u in usage),
        sum(u["output"] for u in usage),
        round(cost, 2),
        cost,
    )


def _database_figures(calls: list[LLMCall]) -> tuple[Any, ...]:
    return _figures(
        sum(c.input_tokens for c in calls),
        sum(c.cached_tokens for c in calls),
        sum(c.output_tokens for c in calls),
        sum(c.cost_usd for c in calls),
    )


def _kinds(generations: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted(
        (
            json.loads(g["langfuse.observation.metadata.supportbot_purpose"]),
            json.loads(g["langfuse.observation.metadata.cache_source"]),
        )
        for g in generations
    )


def _assert_langfuse_equals_database(
    server: LocalServer, stored: dict[str, list[LLMCall]], turns: int
) -> None:
    exported = _exported(server)
    assert len(stored) == turns and set(exported) == set(stored)
    for trace_id, calls in stored.items():
        generations = exported[trace_id]
        assert len(generations) == len(calls)
        assert _langfuse_figures(generations) == _database_figures(calls)
        assert _kinds(generations) == sorted((c.purpose, c.cache_source) for c in calls)
    everything = [g for generations in exported.values() for g in generations]
    every_call = [c for calls in stored.values() for c in calls]
    assert _langfuse_figures(everything) == _database_figures(every_call)
    assert sum(c.cached_tokens for c in every_call) > 0

    scores = exported_scores(server)
    for trace_id, calls in stored.items():
        agent = [c for c in calls if c.purpose == "agent"]
        hit_rate = sum(c.cached_tokens for c in agent) / sum(c.input_tokens for c in agent)
        (score,) = [
            s["value"] for s in scores if s["traceId"] == trace_id and s["name"] == "cache_hit_rate"
        ]
        assert score == pytest.approx(hit_rate)


def _attribute_sizes(server: LocalServer) -> Iterator[int]:
    for span in exported_spans(server):
        for value in span.values():
            if isinstance(value, str):
                yield len(value)


async def test_a_30_turn_offline_client_chat_shows_in_langfuse_as_in_the_database(
    settings: Settings,
    pg_connection: AsyncConnection,
    pg_sessions: async_sessionmaker[AsyncSession],
    local_server: LocalServer,
) -> None:
    settings = chat_settings(settings, local_server)

    tracer, _, key = await converse(settings, pg_connection, CapturingChatModel(), turns=30)

    stored = await _stored(pg_sessions, key)
    assert {c.cache_source for calls in stored.values() for c in calls} == {"simulated"}
    _assert_langfuse_equals_database(local_server, stored, 30)
    assert max(_attribute_sizes(local_server)) <= MAX_CHARS

    roots = [s for s in exported_spans(local_server) if s.get("langfuse.internal.as_root")]
    assert len(roots) == 30
    for root in roots:
        assert json.loads(root["langfuse.observation.input"])["text"] in QUESTIONS
        assert json.loads(root["langfuse.observation.input"])["channel"] == "telegram"
        assert json.loads(root["langfuse.observation.output"])["text"]
    cleared = [r for r in roots if "memory:cleared" in r["langfuse.trace.tags"]]
    folded = [r for r in roots if "memory:folded" in r["langfuse.trace.tags"]]
    assert cleared and folded
    for root in cleared:
        assert int(json.loads(root[TRACE_METADATA + "memory_results_cleared"])) > 0
        assert int(json.loads(root[TRACE_METADATA + "memory_tokens_freed"])) > 0
    for root in folded:
        assert int(json.loads(root[TRACE_METADATA + "memory_messages_folded"])) > 0
        assert int(json.loads(root[TRACE_METADATA + "memory_summary_version"])) >= 1
    prefix_kept = {
        s["traceId"]: s["value"]
        for s in exported_scores(local_server)
        if s["name"] == "prefix_kept"
    }
    for root in [*cleared, *folded]:
        assert prefix_kept[root["trace_id"]] == 0.0
    assert 1.0 in prefix_kept.values()
    summaries = [
        s
        for s in exported_spans(local_server)
        if s.get("langfuse.observation.type") == "generation"
        and json.loads(s["langfuse.observation.metadata.supportbot_purpose"]) == "summary"
    ]
    assert summaries  # the summarizer's calls are generations too, with their purpose
    tracer.close()


async def test_a_provider_reporting_cached_tokens_shows_in_langfuse_as_in_the_database(
    settings: Settings,
    pg_connection: AsyncConnection,
    pg_sessions: async_sessionmaker[AsyncSession],
    local_server: LocalServer,
) -> None:
    settings = chat_settings(settings, local_server)
    with ScriptedLLM() as base_url:
        model = ChatOpenAI(model="gpt-5-mini", base_url=base_url, api_key="dummy")
        tracer, _, key = await converse(settings, pg_connection, model, turns=6)

    stored = await _stored(pg_sessions, key)
    agent_calls = [c for calls in stored.values() for c in calls if c.purpose == "agent"]
    assert {c.cache_source for c in agent_calls} == {"provider"}
    assert all(c.cost_usd > 0 for c in agent_calls)  # gpt-5-mini is priced
    _assert_langfuse_equals_database(local_server, stored, 6)
    tracer.close()


async def test_a_failed_turn_is_an_error_trace_with_the_users_message(
    settings: Settings, pg_connection: AsyncConnection, local_server: LocalServer
) -> None:
    settings = chat_settings(settings, local_server)
    model = CapturingChatModel(fail_with="provider unavailable")

    with pytest.raises(TurnFailed):
        await converse(settings, pg_connection, model, turns=1)

    [root] = [s for s in exported_spans(local_server) if s.get("langfuse.internal.as_root")]
    assert root["langfuse.observation.level"] == "ERROR"
    assert "provider unavailable" in root["langfuse.observation.status_message"]
    assert json.loads(root["langfuse.observation.input"])["text"] == QUESTIONS[0]
    assert exported_scores(local_server) == []  # no answer, nothing to score
