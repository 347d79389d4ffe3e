"""Provider cache hints: Anthropic breakpoints, an OpenAI prompt_cache_key per conversation."""

from typing import Any
from unittest.mock import MagicMock

from langchain.agents.middleware import ModelRequest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from app.agent.memory.cache_hints import EPHEMERAL, with_cache_hints
from app.agent.memory.middleware import with_summary
from app.agent.memory.prefix import extends, message_key
from app.agent.memory.state import MemoryContext
from tests.fakes import CapturingChatModel


class FakeProviderModel(CapturingChatModel):
    provider: str = "anthropic-chat"

    @property
    def _llm_type(self) -> str:
        return self.provider


def request(provider: str) -> ModelRequest[MemoryContext]:
    runtime: Any = MagicMock(context=MemoryContext(conversation_id=42))
    return ModelRequest(
        model=FakeProviderModel(provider=provider),
        messages=[HumanMessage("Ann: hi", id="1"), HumanMessage("Ann: how?", id="2")],
        system_message=with_summary(SystemMessage("prompt"), "summary"),
        tools=[],
        tool_choice=None,
        response_format=None,
        state={"messages": []},
        runtime=runtime,
    )


def test_anthropic_gets_breakpoints_after_prompt_summary_and_last_message() -> None:
    hinted = with_cache_hints(request("anthropic-chat"))
    assert hinted.system_message is not None
    assert hinted.system_message.content == [
        {"type": "text", "text": "prompt", "cache_control": EPHEMERAL},
        {"type": "text", "text": "summary", "cache_control": EPHEMERAL},
    ]
    assert hinted.messages[0].content == "Ann: hi"
    assert hinted.messages[1].content == [
        {"type": "text", "text": "Ann: how?", "cache_control": EPHEMERAL}
    ]


def test_openai_gets_one_cache_key_per_conversation_and_others_nothing() -> None:
    hinted = with_cache_hints(request("openai-chat"))
    assert hinted.model_settings == {"prompt_cache_key": "supportbot-conversation-42"}
    plain = request("supportbot-offline")
    assert with_cache_hints(plain) is plain


def test_the_offline_model_gets_the_hints_of_the_provider_it_is_simulated_as() -> None:
    offline = request("supportbot-offline")
    anthropic = with_cache_hints(offline, simulated_provider="anthropic")
    assert anthropic.system_message is not None
    assert anthropic.system_message.content[0]["cache_control"] == EPHEMERAL  # type: ignore[index]
    assert anthropic.messages[-1].content[0]["cache_control"] == EPHEMERAL  # type: ignore[index]
    openai = with_cache_hints(offline, simulated_provider="openai")
    assert openai.model_settings == {"prompt_cache_key": "supportbot-conversation-42"}
    assert with_cache_hints(offline, simulated_provider="gemini") is offline


def test_a_hinted_request_extends_the_previous_one_as_the_provider_sees_it() -> None:
    first = with_cache_hints(request("anthropic-chat"))
    following = [*request("anthropic-chat").messages, AIMessage("Hello, Ann.")]
    previous_request = [first.system_message, *first.messages]
    following_request = [with_summary(SystemMessage("prompt"), "summary"), *following]

    assert extends(previous_request, following_request)  # type: ignore[arg-type]
    assert message_key(first.messages[-1]) == message_key(HumanMessage("Ann: how?"))
    assert not extends([HumanMessage("Ann: how")], [HumanMessage("Ann: how?")])
