"""Provider-shaped usage, normalised: input counts every input token, cached ones included."""

from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_openai import ChatOpenAI

from app.observability.simulator import CacheOutcome
from app.observability.usage import (
    SIMULATED_CACHE_KEY,
    UsageRecord,
    UsageTotals,
    langfuse_cost_details,
    langfuse_usage_details,
    normalize_usage,
)

from .conftest import LocalServer


def _completion(model: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": usage,
    }


def _ask(server: LocalServer, model: str, usage: dict[str, Any]) -> AIMessage:
    """One real ChatOpenAI call against a local OpenAI-compatible endpoint."""
    server.answer = lambda path: _completion(model, usage)
    chat = ChatOpenAI(model=model, base_url=f"{server.url}/v1", api_key="k", max_retries=0)
    reply = chat.invoke("hello")
    assert isinstance(reply, AIMessage)
    return reply


def test_openai_cached_tokens_are_part_of_the_prompt_tokens(local_server: LocalServer) -> None:
    reply = _ask(
        local_server,
        "gpt-5-mini",
        {
            "prompt_tokens": 2006,
            "completion_tokens": 300,
            "total_tokens": 2306,
            "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 256, "audio_tokens": 0},
        },
    )

    usage = normalize_usage(reply.usage_metadata, reply.response_metadata)

    assert usage == UsageRecord(
        input_tokens=2006,
        cached_tokens=1920,
        cache_write_tokens=0,
        output_tokens=300,
        cache_source="provider",
    )
    assert usage.uncached_input_tokens == 86
    assert usage.cache_hit_rate == pytest.approx(1920 / 2006)


def test_gemini_through_openrouter_reports_reads_and_writes(local_server: LocalServer) -> None:
    reply = _ask(
        local_server,
        "google/gemini-3.1-pro-preview",
        {
            "prompt_tokens": 12000,
            "completion_tokens": 150,
            "total_tokens": 12150,
            "cost": 0.0042,
            "prompt_tokens_details": {"cached_tokens": 9000, "cache_write_tokens": 2500},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    )

    usage = normalize_usage(reply.usage_metadata, reply.response_metadata)

    assert (usage.input_tokens, usage.cached_tokens, usage.cache_write_tokens) == (
        12000,
        9000,
        2500,
    )
    assert usage.output_tokens == 150
    assert usage.uncached_input_tokens == 500
    assert usage.cache_source == "provider"


def test_openai_compatible_server_without_cache_details_reports_no_cache(
    local_server: LocalServer,
) -> None:
    reply = _ask(
        local_server,
        "llama",
        {"prompt_tokens": 700, "completion_tokens": 20, "total_tokens": 720},
    )

    usage = normalize_usage(reply.usage_metadata, reply.response_metadata)

    assert usage == UsageRecord(input_tokens=700, output_tokens=20, cache_source="none")


# What langchain-anthropic builds from Anthropic's usage (its `_create_usage_metadata`):
# the raw `input_tokens` (uncached only) plus cache reads plus cache writes.
ANTHROPIC_RAW = {
    "input_tokens": 21,
    "cache_creation_input_tokens": 1800,
    "cache_read_input_tokens": 9000,
    "output_tokens": 393,
}
ANTHROPIC_USAGE_METADATA = {
    "input_tokens": 21 + 9000 + 1800,
    "output_tokens": 393,
    "total_tokens": 21 + 9000 + 1800 + 393,
    "input_token_details": {"cache_read": 9000, "cache_creation": 1800},
}


def test_anthropic_through_langchain() -> None:
    usage = normalize_usage(
        ANTHROPIC_USAGE_METADATA, {"usage": ANTHROPIC_RAW, "model": "claude-haiku-4-5"}
    )

    assert usage == UsageRecord(
        input_tokens=10821,
        cached_tokens=9000,
        cache_write_tokens=1800,
        output_tokens=393,
        cache_source="provider",
    )
    assert usage.uncached_input_tokens == 21


def test_anthropic_raw_usage_alone_adds_the_cache_back_to_the_input() -> None:
    usage = normalize_usage(None, {"usage": ANTHROPIC_RAW})

    assert usage == UsageRecord(
        input_tokens=10821,
        cached_tokens=9000,
        cache_write_tokens=1800,
        output_tokens=393,
        cache_source="provider",
    )


def test_simulated_cache_is_labelled_as_such() -> None:
    offline = {"input_tokens": 5000, "output_tokens": 80, "total_tokens": 5080}

    plain = normalize_usage(offline, {"model_name": "offline"})
    flagged = normalize_usage(
        {**offline, "input_token_details": {"cache_read": 4096}},
        {"model_name": "offline", SIMULATED_CACHE_KEY: True},
    )
    replayed = plain.with_simulated_cache(CacheOutcome(cached_tokens=4096, written_tokens=904))

    assert plain.cache_source == "none"
    assert (flagged.cached_tokens, flagged.cache_source) == (4096, "simulated")
    assert replayed == UsageRecord(5000, 4096, 904, 80, "simulated")


def test_missing_usage_is_zero() -> None:
    assert normalize_usage(None, None) == UsageRecord()
    assert UsageRecord().cache_hit_rate == 0.0


def test_usages_of_a_turn_add_up() -> None:
    first = UsageRecord(1200, 1000, 0, 20, "provider", cost={"input": 0.001, "output": 0.002})
    second = UsageRecord(1500, 1200, 100, 50, "provider", cost={"input": 0.004})

    total = UsageTotals.of([first, second])

    assert total == UsageTotals(2, 2700, 2200, 100, 70, total.cost_usd)
    assert total.cost_usd == pytest.approx(0.007)
    assert total.cached_share == pytest.approx(2200 / 2700)


def test_langfuse_reads_the_record_input_as_uncached_input_only() -> None:
    priced = UsageRecord(1500, 1200, 100, 50, "simulated", cost={"input": 0.4, "output": 0.1})

    assert langfuse_usage_details(priced) == {
        "input": 200,
        "input_cache_read": 1200,
        "input_cache_creation": 100,
        "output": 50,
        "total": 1550,
    }
    assert langfuse_cost_details(priced) == {"input": 0.4, "output": 0.1, "total": 0.5}
    assert langfuse_cost_details(UsageRecord(10, 0, 0, 1)) is None  # unpriced
