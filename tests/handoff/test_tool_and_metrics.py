"""A real model's way in (the `request_human` tool) and the handoff metrics."""

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from app.agent.messages import message_text
from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnRequest
from app.handoff.service import HandoffService
from app.handoff.tool import REQUEST_HUMAN
from app.observability.metrics import REGISTRY
from app.runtime import agent_factory
from app.settings import Settings
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever


class HandsOverModel(CapturingChatModel):
    """Calls request_human when the user says the answer is wrong, then says so."""

    def _reply(self, messages: list[BaseMessage], tool_names: set[str]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and "answer is wrong" in message_text(last):
            call = {"name": REQUEST_HUMAN, "args": {"reason": "answers miss"}, "id": "h1"}
            return AIMessage(content="", tool_calls=[call])
        if isinstance(last, ToolMessage) and last.name == REQUEST_HUMAN:
            return AIMessage(content="I have asked a colleague to take over.")
        return super()._reply(messages, tool_names)


async def test_a_real_model_hands_over_with_request_human(
    settings: Settings, turns: TurnStore, handoffs: HandoffService
) -> None:
    settings.llm.model = "provider:some-model"  # the offline model is not offered the tool
    model = HandsOverModel()
    chat = ChatService(
        settings,
        turns,
        agent_factory(settings, model, KeywordRetriever(ARTICLES)),
        handoffs=handoffs,
    )
    staff = await chat.handle_turn(TurnRequest("widget", "widget:alice:1", "staff", "alice", "hi"))
    assert staff.text and [t["function"]["name"] for t in model.calls[-1].tools] == [
        "search_knowledge_base"
    ]

    reply = await chat.handle_turn(
        TurnRequest("api", "api:acme:2", "client", "Ann", "This answer is wrong.")
    )

    assert REQUEST_HUMAN in [t["function"]["name"] for t in model.calls[-1].tools]
    assert reply.text.startswith("I have asked a colleague to take over.\n\nI am handing")
    (handoff,) = await handoffs.queue()
    assert (handoff.reason, handoff.requested_by) == ("model", "Ann")


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_opened_claimed_resolved_and_time_to_claim_are_counted(
    chat: ChatService, handoffs: HandoffService
) -> None:
    opened = {"reason": "asked", "audience": "client"}
    before = [
        sample("supportbot_handoffs_opened_total", **opened),
        sample("supportbot_handoffs_claimed_total"),
        sample("supportbot_handoffs_resolved_total"),
        sample("supportbot_handoff_claim_seconds_count"),
        sample("supportbot_turns_total", status="ok", channel="api"),
    ]
    await chat.handle_turn(TurnRequest("api", "api:acme:3", "client", "Ann", "talk to a human"))
    (handoff,) = await handoffs.queue()
    await handoffs.claim(handoff.id, "alice")
    await handoffs.resolve(handoff.id, "alice")
    after = [
        sample("supportbot_handoffs_opened_total", **opened),
        sample("supportbot_handoffs_claimed_total"),
        sample("supportbot_handoffs_resolved_total"),
        sample("supportbot_handoff_claim_seconds_count"),
        sample("supportbot_turns_total", status="ok", channel="api"),
    ]
    # the turn the handoff took (no model call) counts like any answered turn
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1, 1, 1]
