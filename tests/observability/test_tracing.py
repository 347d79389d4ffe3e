"""A LangChain agent traced to a local stand-in for Langfuse: what the SDK really sends."""

import base64
import json
import uuid
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

import langfuse
import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from app.observability import tracing
from app.observability.calls import UsageCollector
from app.observability.tracing import MemoryReport, Tracer
from app.settings import LangfuseSettings, ObservabilitySettings, Settings

from .conftest import SCORES_PATH, TRACES_PATH, LocalServer, exported_scores, exported_spans

SERVED_MODEL = "google/gemini-3.1-pro-preview"
USAGE = "langfuse.observation.usage_details"
COST = "langfuse.observation.cost_details"


def _reply(
    content: str, *, input_tokens: int, cached: int, output: int, **kwargs: Any
) -> AIMessage:
    return AIMessage(
        content,
        usage_metadata={
            "input_tokens": input_tokens,
            "output_tokens": output,
            "total_tokens": input_tokens + output,
            "input_token_details": {"cache_read": cached},
        },
        response_metadata={"model_name": SERVED_MODEL},
        **kwargs,
    )


class ScriptedChatModel(BaseChatModel):
    """Answers with the given replies in turn, the way a tool-calling provider would."""

    replies: list[AIMessage]
    model_name: str = "gemini-3.1-pro"
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        reply = self.replies[self.calls]
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def search_knowledge_base(query: str) -> str:
    """Search the product documentation."""
    return "Set the VAT rates under Settings → Taxes."


def _agent() -> Any:
    model = ScriptedChatModel(
        replies=[
            _reply(
                "",
                input_tokens=1200,
                cached=1000,
                output=20,
                tool_calls=[
                    {"name": "search_knowledge_base", "args": {"query": "VAT"}, "id": "c1"}
                ],
            ),
            _reply("Under Settings → Taxes.", input_tokens=1500, cached=1200, output=50),
        ]
    )
    return create_agent(model, tools=[search_knowledge_base], system_prompt="You help.")


def langfuse_settings(server: LocalServer, **changes: Any) -> LangfuseSettings:
    # A fresh public key per test: the SDK keeps one client per key for the process.
    return LangfuseSettings(
        public_key=f"pk-lf-{uuid.uuid4().hex}",
        secret_key="sk-lf-test",
        base_url=server.url,
        **changes,
    )


async def test_a_traced_turn_exports_usage_cost_session_tags_and_scores(
    local_server: LocalServer,
) -> None:
    tracer = Tracer.from_settings(Settings(langfuse=langfuse_settings(local_server)))
    assert tracer.enabled
    question = "How do I set the VAT rate?"

    with tracer.turn(
        "telegram:-1001:7",
        "anna",
        "client",
        "client",
        "telegram",
        "openrouter:" + SERVED_MODEL,
        question,
    ) as trace:
        assert trace is not None
        collector = UsageCollector("client", ObservabilitySettings(), sink=trace)
        result = await _agent().ainvoke(
            {"messages": [HumanMessage(question)]}, config={"callbacks": [collector, trace]}
        )
        trace.finish(
            result["messages"][-1].text,
            [{"title": "VAT", "source": "en/vat.md"}],
            collector.records,
            MemoryReport(results_cleared=2, tokens_freed=900, prefix_kept=False),
        )
    tracer.flush()

    assert result["messages"][-1].content == "Under Settings → Taxes."
    keys = f"{tracer.settings.public_key}:sk-lf-test".encode()
    for request in local_server.requests:  # spans and scores, as a Langfuse would check
        assert request.headers["authorization"] == f"Basic {base64.b64encode(keys).decode()}"
    assert {r.path for r in local_server.requests} == {TRACES_PATH, SCORES_PATH}
    spans = exported_spans(local_server)
    assert spans and {span["trace_id"] for span in spans} == {trace.trace_id}
    by_id = {span["span_id"]: span for span in spans}
    root = next(s for s in spans if s.get("langfuse.internal.as_root"))
    assert root["name"] == tracing.TRACE_NAME
    assert json.loads(root["langfuse.observation.input"]) == {
        "text": question,
        "author": "anna",
        "channel": "telegram",
    }
    assert json.loads(root["langfuse.observation.output"]) == {
        "text": "Under Settings → Taxes.",
        "citations": [{"title": "VAT", "source": "en/vat.md"}],
    }
    assert "memory:cleared" in root["langfuse.trace.tags"]
    assert "memory:prefix-changed" in root["langfuse.trace.tags"]
    assert json.loads(root["langfuse.trace.metadata.memory_tokens_freed"]) == "900"
    assert root["langfuse.release"] == version("supportbot")  # not the checkout's revision
    assert root["resource.service.name"] == "supportbot"
    assert root["langfuse.environment"] == "development"

    generations = [s for s in spans if s.get("langfuse.observation.type") == "generation"]
    assert len(generations) == 2
    for generation in generations:
        assert json.loads(generation["langfuse.observation.metadata.supportbot_purpose"]) == "agent"
        assert by_id[generation["parent_id"]]["name"] == "model"  # nested under its step
    first, second = sorted(generations, key=lambda s: json.loads(s[USAGE])["input"])
    assert [json.loads(first[USAGE]), json.loads(second[USAGE])] == [
        {"input": 200, "input_cache_read": 1000, "input_cache_creation": 0, "output": 20}
        | {"total": 1220},
        {"input": 300, "input_cache_read": 1200, "input_cache_creation": 0, "output": 50}
        | {"total": 1550},
    ]
    # gemini-3.1-pro: $2 input, $0.20 cached input, $12 output per 1M tokens.
    assert json.loads(first[COST]) == pytest.approx(
        {
            "input": 200 * 2e-6,
            "input_cache_read": 1000 * 0.2e-6,
            "input_cache_creation": 0.0,
            "output": 20 * 12e-6,
            "total": 200 * 2e-6 + 1000 * 0.2e-6 + 20 * 12e-6,
        }
    )
    assert [json.loads(g[COST])["total"] for g in (first, second)] == pytest.approx(
        [r.cost_usd for r in sorted(collector.records, key=lambda r: r.input_tokens)]
    )
    tools = [s for s in spans if s.get("langfuse.observation.type") == "tool"]
    assert [json.loads(t["langfuse.observation.input"]) for t in tools] == [{"query": "VAT"}]
    for span in spans:
        assert span["session.id"] == "telegram:-1001:7"
        assert span["user.id"] == "anna"
        assert {"audience:client", "channel:telegram", "profile:client"} <= set(
            span["langfuse.trace.tags"]
        )
        assert span["langfuse.trace.name"] == tracing.TRACE_NAME

    by_name = {score["name"]: score for score in exported_scores(local_server)}
    assert by_name["cache_hit_rate"]["value"] == pytest.approx(2200 / 2700)
    assert by_name["context_tokens"]["value"] == 1500
    assert by_name["prefix_kept"]["value"] == 0.0
    assert {score["traceId"] for score in by_name.values()} == {trace.trace_id}


async def test_with_langfuse_off_nothing_is_created_or_sent(
    local_server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_client(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a Langfuse client was created")

    monkeypatch.setattr(langfuse, "Langfuse", no_client)
    tracer = Tracer.from_settings(
        Settings(langfuse=LangfuseSettings(public_key="pk-lf-only", base_url=local_server.url))
    )

    with tracer.turn("api:1", "bob", "staff", "staff", "api", "offline", "VAT?") as trace:
        await _agent().ainvoke({"messages": [HumanMessage("VAT?")]})
    tracer.flush()
    tracer.close()

    assert not tracer.enabled
    assert trace is None
    assert local_server.requests == []


def test_a_long_request_shows_its_system_prompt_and_latest_messages() -> None:
    messages: list[BaseMessage] = [SystemMessage("You help.")]
    messages += [HumanMessage(f"question {n} → " + "x" * 300) for n in range(40)]

    view = tracing.messages_view(messages, limit=2000)

    assert len(json.dumps(view)) <= 2000  # as the SDK serializes it: → is \u2192
    assert view[0] == {"role": "system", "content": "You help."}
    assert view[1]["role"] == "note" and "messages not shown" in view[1]["content"]
    assert view[-1]["content"].startswith("question 39 ")
    shown = int(view[1]["content"].strip("[").split()[0])
    assert shown + len(view) - 2 == 40
