"""The scripted provider speaks the OpenAI protocol well enough for ChatOpenAI, faults included."""

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from app.agent.models import build_chat_model
from app.bench.scripted_llm import Fault, Reply, ScriptedLLM
from app.settings import LLMSettings


@tool
def search_knowledge_base(query: str) -> str:
    """Search the help center."""
    return f"[1] Invoices: {query} are sent from Customers > Invoices."


def scripted_model(base_url: str, **overrides: object) -> ChatOpenAI:
    """The model exactly as the service builds it for SUPPORTBOT_LLM__BASE_URL."""
    settings = LLMSettings(model="scripted", base_url=base_url, api_key="dummy", **overrides)
    model = build_chat_model(settings.model, settings)
    assert isinstance(model, ChatOpenAI)
    return model


@pytest.mark.parametrize("streaming", [False, True])
def test_default_policy_searches_then_answers_quoting_the_result(streaming: bool) -> None:
    server = ScriptedLLM()
    with server as base_url:
        model = scripted_model(base_url).bind_tools([search_knowledge_base])
        invoke = model.invoke if not streaming else lambda m: _collect(model.stream(m))
        question = HumanMessage("How do I send an invoice?")
        first = invoke([question])
        assert isinstance(first, AIMessage)
        assert [(c["name"], c["args"]) for c in first.tool_calls] == [
            ("search_knowledge_base", {"query": "How do I send an invoice?"})
        ]
        result = search_knowledge_base.invoke(first.tool_calls[0]["args"])
        second = invoke(
            [question, first, ToolMessage(result, tool_call_id=first.tool_calls[0]["id"])]
        )
    assert "**From the help center:**" in second.content
    assert "> [1] Invoices: How do I send an invoice?" in second.content
    assert second.usage_metadata is not None and second.usage_metadata["input_tokens"] > 0
    assert [body["stream"] for body in server.requests] == [streaming, streaming]
    assert server.requests[1]["messages"][-1]["role"] == "tool"


def _collect(chunks: Iterator[Any]) -> AIMessage:
    """A streamed reply as one message: the chunks added up, as LangChain merges them."""
    total: Any = None
    for chunk in chunks:
        total = chunk if total is None else total + chunk
    assert total is not None
    return AIMessage(
        content=total.content, tool_calls=total.tool_calls, usage_metadata=total.usage_metadata
    )


def test_cached_tokens_count_a_repeated_prefix() -> None:
    server = ScriptedLLM([Reply("one"), Reply("two")])
    long_question = "Which report shows the VAT owed for the quarter? " * 60
    with server as base_url:
        model = scripted_model(base_url)
        first = model.invoke([HumanMessage(long_question)])
        second = model.invoke([HumanMessage(long_question), first, HumanMessage("and for a year?")])
    assert first.usage_metadata is not None and second.usage_metadata is not None
    assert first.usage_metadata["input_token_details"].get("cache_read", 0) == 0
    assert (
        second.usage_metadata["input_token_details"]["cache_read"] >= len(long_question) // 4 - 128
    )


def test_streamed_usage_only_when_asked_for() -> None:
    server = ScriptedLLM([Reply("a b c"), Reply("a b c")])
    with server as base_url:
        with_usage = _collect(scripted_model(base_url).stream("hi"))
        plain = ChatOpenAI(model="scripted", base_url=base_url, api_key="dummy", stream_usage=False)
        without_usage = _collect(plain.stream("hi"))
    assert with_usage.content == without_usage.content == "a b c"
    assert with_usage.usage_metadata is not None
    assert without_usage.usage_metadata is None
    assert server.requests[0]["stream_options"] == {"include_usage": True}


def test_rate_limit_carries_retry_after_and_the_client_retries() -> None:
    server = ScriptedLLM([Fault.RATE_LIMIT, Reply("after the wait")], retry_after_seconds=0)
    with server as base_url:
        client = openai.OpenAI(base_url=base_url, api_key="dummy", max_retries=0)
        with pytest.raises(openai.RateLimitError) as raised:
            client.chat.completions.create(
                model="scripted", messages=[{"role": "user", "content": "x"}]
            )
        assert raised.value.response.headers["retry-after"] == "0"
        answer = ChatOpenAI(model="scripted", base_url=base_url, api_key="dummy", max_retries=1)
        assert answer.invoke("hi").content == "after the wait"
    assert [r.fault for r in server.received] == [Fault.RATE_LIMIT, None]


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (Fault.SERVER_ERROR, openai.InternalServerError),
        (Fault.BAD_GATEWAY, openai.InternalServerError),
        (Fault.UNAVAILABLE, openai.InternalServerError),
        (Fault.TIMEOUT, openai.APITimeoutError),
        (Fault.DROP, openai.APIConnectionError),
        (Fault.MALFORMED, json.JSONDecodeError),
    ],
)
@pytest.mark.parametrize("streaming", [False, True])
def test_each_fault_reaches_the_client_as_its_error(
    fault: Fault, error: type[Exception], streaming: bool
) -> None:
    server = ScriptedLLM([fault, Reply("recovered")], hang_seconds=5)
    with server as base_url:
        model = ChatOpenAI(
            model="scripted",
            base_url=base_url,
            api_key="dummy",
            max_retries=0,
            timeout=0.5,
        )
        with pytest.raises(error):
            model.invoke("hi") if not streaming else _collect(model.stream("hi"))
        assert model.invoke("hi").content == "recovered"  # the server is fine afterwards
    assert [r.fault for r in server.received] == [fault, None]


def test_fault_rate_is_seeded_and_fail_next_comes_first() -> None:
    def run() -> list[Fault | None]:
        server = ScriptedLLM(fault_rate=0.5, fault_kinds=[Fault.SERVER_ERROR], seed=7)
        with server as base_url:
            server.fail_next(Fault.UNAVAILABLE)
            model = ChatOpenAI(model="scripted", base_url=base_url, api_key="dummy", max_retries=0)
            for _ in range(12):
                with contextlib.suppress(openai.APIStatusError):
                    model.invoke("hi")
        return [r.fault for r in server.received]

    faults = run()
    assert faults == run()
    assert faults[0] is Fault.UNAVAILABLE
    assert {Fault.SERVER_ERROR, None} <= set(faults[1:])
