"""A LangChain agent traced to a local stand-in for Langfuse: what the SDK really sends."""

import json
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from app.observability import tracing
from app.observability.tracing import Tracer
from app.settings import LangfuseSettings, Settings

from .conftest import LocalServer

TRACES_PATH = "/api/public/otel/v1/traces"
SCORES_PATH = "/api/public/scores"
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


def _settings(server: LocalServer) -> Settings:
    # A fresh public key per test: the SDK keeps one client per key for the process.
    return Settings(
        langfuse=LangfuseSettings(
            public_key=f"pk-lf-{uuid.uuid4().hex}", secret_key="sk-lf-test", base_url=server.url
        )
    )


def _spans(server: LocalServer) -> list[dict[str, Any]]:
    spans = []
    for body in server.bodies(TRACES_PATH):
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes: dict[str, Any] = {}
                    for attribute in span.attributes:
                        value = attribute.value
                        if value.HasField("array_value"):
                            attributes[attribute.key] = [
                                item.string_value for item in value.array_value.values
                            ]
                        else:
                            attributes[attribute.key] = getattr(value, value.WhichOneof("value"))
                    spans.append({"trace_id": span.trace_id.hex(), "name": span.name, **attributes})
    return spans


async def test_a_traced_turn_exports_usage_cost_session_tags_and_scores(
    local_server: LocalServer,
) -> None:
    tracer = Tracer.from_settings(_settings(local_server))
    assert tracer.enabled

    with tracer.turn(
        conversation_key="telegram:-1001:7",
        author="anna",
        audience="client",
        profile="client",
        channel="telegram",
        model="openrouter:" + SERVED_MODEL,
    ) as turn:
        result = await _agent().ainvoke(
            {"messages": [HumanMessage("How do I set the VAT rate?")]},
            config={"callbacks": turn.callbacks, "metadata": turn.metadata},
        )
        turn.score(cache_hit_rate=2200 / 2700, context_tokens=1500)
    tracer.flush()

    assert result["messages"][-1].content == "Under Settings → Taxes."
    spans = _spans(local_server)
    assert spans and {span["trace_id"] for span in spans} == {turn.trace_id}
    generations = [s for s in spans if s.get("langfuse.observation.type") == "generation"]
    assert len(generations) == 2
    first, second = sorted(generations, key=lambda s: json.loads(s[USAGE])["input"])
    assert json.loads(first[USAGE]) == {
        "input": 200,
        "input_cache_read": 1000,
        "output": 20,
        "total": 1220,
    }
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
    assert json.loads(second[COST])["total"] == pytest.approx(
        300 * 2e-6 + 1200 * 0.2e-6 + 50 * 12e-6
    )
    for span in spans:
        assert span["session.id"] == "telegram:-1001:7"
        assert span["user.id"] == "anna"
        assert sorted(span["langfuse.trace.tags"]) == [
            "audience:client",
            "channel:telegram",
            "profile:client",
        ]
        assert span["langfuse.trace.name"] == tracing.TRACE_NAME

    scores = [s for body in local_server.bodies(SCORES_PATH) for s in json.loads(body)]  # batches
    by_name = {score["name"]: score for score in scores}
    assert by_name["cache_hit_rate"]["value"] == pytest.approx(2200 / 2700)
    assert by_name["context_tokens"]["value"] == 1500
    assert {score["traceId"] for score in scores} == {turn.trace_id}


async def test_with_langfuse_off_nothing_is_created_or_sent(
    local_server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_client(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a Langfuse client was created")

    monkeypatch.setattr(tracing, "Langfuse", no_client)
    tracer = Tracer.from_settings(
        Settings(langfuse=LangfuseSettings(public_key="pk-lf-only", base_url=local_server.url))
    )

    with tracer.turn("api:1", "bob", "staff", "staff", "api", "offline") as turn:
        await _agent().ainvoke(
            {"messages": [HumanMessage("VAT?")]},
            config={"callbacks": turn.callbacks, "metadata": turn.metadata},
        )
        turn.score(cache_hit_rate=0.5, context_tokens=10)
    tracer.flush()

    assert not tracer.enabled
    assert (turn.callbacks, turn.metadata, turn.trace_id) == ([], {}, None)
    assert local_server.requests == []
