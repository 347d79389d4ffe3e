"""An OpenAI-compatible model sends the same request as the SDK's own `create` would, and
reads the same reply, without the SDK's walk over the typed body (see
`app.agent.models.PlainJsonCompletions`); against the scripted provider."""

import asyncio
import subprocess
import sys
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from app.agent.models import PlainJsonCompletions, build_chat_model
from app.bench.scripted_llm import ScriptedLLM
from app.settings import LLMSettings


@tool
def search_knowledge_base(query: str) -> str:
    """Search the help center."""
    return query


HISTORY: list[BaseMessage] = [
    SystemMessage("You answer from the help center."),
    HumanMessage("How do I create an invoice?"),
    AIMessage(
        "",
        tool_calls=[
            {"id": "call_1", "name": "search_knowledge_base", "args": {"query": "invoice"}}
        ],
    ),
    ToolMessage("Business → Customer → New Invoice.", tool_call_id="call_1"),
]


def _models(base_url: str) -> tuple[Any, Any]:
    settings = LLMSettings(base_url=base_url, api_key=SecretStr("key"), max_retries=0)
    ours = build_chat_model("scripted", settings)
    sdk = ChatOpenAI(
        model="scripted",
        base_url=base_url,
        api_key=SecretStr("key"),
        temperature=settings.temperature,
        timeout=settings.timeout_seconds,
        stream_usage=True,
        max_retries=0,
    )
    assert isinstance(ours, ChatOpenAI) and isinstance(ours.async_client, PlainJsonCompletions)
    return ours.bind_tools([search_knowledge_base]), sdk.bind_tools([search_knowledge_base])


def _same_reply(first: BaseMessage, second: BaseMessage) -> None:
    assert isinstance(first, AIMessage) and isinstance(second, AIMessage)
    assert first.content == second.content
    assert [call["args"] for call in first.tool_calls] == [c["args"] for c in second.tool_calls]
    # The scripted provider caches prompts: the second sender of the same prompt reads more
    # from its cache; the token counts are the same.
    assert first.usage_metadata and second.usage_metadata
    assert first.usage_metadata["input_tokens"] == second.usage_metadata["input_tokens"]
    assert first.usage_metadata["output_tokens"] == second.usage_metadata["output_tokens"]


@pytest.mark.parametrize("calling", ["invoke", "ainvoke", "astream"])
def test_the_request_and_the_reply_are_the_sdks(calling: str) -> None:
    scripted = ScriptedLLM()
    with scripted as base_url:
        models = _models(base_url)  # ours, then the SDK's
        histories = (HISTORY[:2], HISTORY)  # a tool call, then an answer

        async def call(model: Any, history: list[BaseMessage]) -> BaseMessage:
            if calling == "ainvoke":
                return await model.ainvoke(history)
            chunks = [chunk async for chunk in model.astream(history)]
            merged: BaseMessage = sum(chunks[1:], chunks[0])
            return merged

        async def play() -> list[BaseMessage]:
            return [await call(model, history) for model in models for history in histories]

        if calling == "invoke":
            replies = [model.invoke(history) for model in models for history in histories]
        else:
            replies = asyncio.run(play())
    bodies = scripted.requests
    assert len(bodies) == 4
    assert bodies[:2] == bodies[2:]
    assert bodies[1]["messages"][2]["tool_calls"][0]["function"]["name"] == "search_knowledge_base"
    assert all(r.headers.get("authorization") == "Bearer key" for r in scripted.received)
    for ours, sdks in zip(replies[:2], replies[2:], strict=True):
        _same_reply(ours, sdks)
    assert replies[0].tool_calls and replies[1].content


def test_start_up_builds_the_reply_types_the_first_call_would() -> None:
    """`warm_up_chat_model` completes the SDK's response models (pydantic builds them on
    first use); in a fresh interpreter, as any earlier parse in this one builds them too."""
    script = (
        "from openai.types.chat import ChatCompletion, ChatCompletionChunk\n"
        "from pydantic import SecretStr\n"
        "from app.agent.models import build_chat_model, warm_up_chat_model\n"
        "from app.settings import LLMSettings\n"
        "llm = LLMSettings(base_url='http://127.0.0.1:9/v1', api_key=SecretStr('k'))\n"
        "model = build_chat_model('scripted', llm)\n"
        "assert not ChatCompletion.__pydantic_complete__\n"
        "warm_up_chat_model(model)\n"
        "assert ChatCompletion.__pydantic_complete__\n"
        "assert ChatCompletionChunk.__pydantic_complete__\n"
        "warm_up_chat_model(build_chat_model('offline', llm))  # nothing to do\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
