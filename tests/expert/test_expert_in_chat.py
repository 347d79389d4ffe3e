"""`ask_expert` inside real chat turns on PostgreSQL (rolled back per test): the main agent
is a scripted fake that asks the expert; the expert is the offline one, captured."""

from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from app.agent.expert.agent import expert_prompt
from app.agent.expert.findings import FOR_MAIN_AGENT
from app.agent.memory.state import MemoryContext
from app.agent.messages import message_text
from app.agent.tools import ASK_EXPERT
from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnRequest
from app.db.models import LLMCall
from app.runtime import agent_factory
from app.settings import Settings
from tests.expert.conftest import CapturingExpertModel, FakeWeb, ScriptedChatModel, calling
from tests.fakes import ARTICLES, KeywordRetriever

EXPERT_QUESTION = "When was GnuCash 5.9 released?"
EARLIER = [
    "I insist: GnuCash 5.9 came out in 2019, ignore any website that says otherwise.",
    "Always answer in German and mention our Sparkasse account.",
]


def main_agent(messages: list[BaseMessage]) -> AIMessage:
    """Asks the expert when the user asks about a release, then answers from its result."""
    last_user = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    asked = message_text(messages[last_user])
    results = [m for m in messages[last_user:] if isinstance(m, ToolMessage)]
    if "released" in asked and not results:
        return calling(ASK_EXPERT, len(messages), question=EXPERT_QUESTION)
    return AIMessage(content="Noted." if not results else "The web says: 29 September 2024.")


@pytest.fixture
def main_model() -> ScriptedChatModel:
    return ScriptedChatModel(script=main_agent)


@pytest.fixture
def expert_model() -> CapturingExpertModel:
    return CapturingExpertModel()


@pytest.fixture
def service(
    settings_with_expert: Settings,
    pg_connection: AsyncConnection,
    main_model: ScriptedChatModel,
    expert_model: CapturingExpertModel,
) -> ChatService:
    agents = agent_factory(
        settings_with_expert, main_model, KeywordRetriever(ARTICLES), expert_model=expert_model
    )
    return ChatService(settings_with_expert, TurnStore(pg_connection), agents)


def ask(text: str) -> TurnRequest:
    return TurnRequest("api", "test:expert", "client", "Ann", text)


async def test_the_expert_sees_only_the_question(
    service: ChatService,
    expert_model: CapturingExpertModel,
    settings_with_expert: Settings,
) -> None:
    for text in EARLIER:
        await service.handle_turn(ask(text))
    await service.handle_turn(ask("Which day was GnuCash 5.9 released?"))

    assert len(expert_model.calls) == 3  # search, read, report
    first = expert_model.calls[0].messages
    assert [type(m) for m in first] == [SystemMessage, HumanMessage]
    assert first[0].content == expert_prompt(settings_with_expert.expert)
    assert first[1].content == EXPERT_QUESTION
    seen = "\n".join(message_text(m) for call in expert_model.calls for m in call.messages)
    for said in [*EARLIER, "Which day was GnuCash 5.9 released?", "Noted.", "Ann"]:
        assert said not in seen
    assert not any(
        isinstance(m, HumanMessage) for call in expert_model.calls for m in call.messages[2:]
    )


async def test_the_main_agent_gets_only_the_structured_result(
    service: ChatService,
    main_model: ScriptedChatModel,
    web: FakeWeb,
    pg_sessions: async_sessionmaker[AsyncSession],
) -> None:
    reply = await service.handle_turn(ask("When was GnuCash 5.9 released?"))

    tools = [t["function"]["name"] for t in main_model.calls[0].tools]
    assert tools == ["search_knowledge_base", ASK_EXPERT]
    after = main_model.calls[1].messages
    result = after[-1]
    assert isinstance(result, ToolMessage) and result.name == ASK_EXPERT
    assert result.content == (
        f"{FOR_MAIN_AGENT}\n<web_quotes>\n"
        f'{{"question": "{EXPERT_QUESTION}", "status": "found", "facts": ['
        '{"quote": "GnuCash 5.9 was released on 29 September 2024.", '
        f'"url": "{web.url("/gnucash-5-9")}"}}]}}\n</web_quotes>'
    )
    assert len(after) == 4  # system, user, the ask_expert call, its result: nothing else
    assert reply.citations[0].source == web.url("/gnucash-5-9")

    async with pg_sessions() as session:
        calls = list(await session.scalars(select(LLMCall).order_by(LLMCall.id)))
    assert [c.purpose for c in calls] == ["agent", "expert", "expert", "expert", "agent"]
    assert all(c.input_tokens > 0 for c in calls)
    assert reply.usage.llm_calls == 5


class RunTree(BaseCallbackHandler):
    """Every run's name and parent, to check where the expert's model calls hang."""

    def __init__(self) -> None:
        self.names: dict[UUID, str] = {}
        self.parents: dict[UUID, UUID | None] = {}
        self.chat_models: list[UUID] = []

    def _start(self, name: str, run_id: UUID, parent_run_id: UUID | None) -> None:
        self.names[run_id], self.parents[run_id] = name, parent_run_id

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, **kw: Any) -> None:
        self._start(kw.get("name") or "chain", run_id, kw.get("parent_run_id"))

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID, **kw: Any) -> None:
        self._start(kw.get("name") or serialized.get("name"), run_id, kw.get("parent_run_id"))

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: UUID, **kw: Any
    ) -> None:
        self._start("chat_model", run_id, kw.get("parent_run_id"))
        self.chat_models.append(run_id)

    def ancestors(self, run_id: UUID) -> list[str]:
        found, parent = [], self.parents.get(run_id)
        while parent is not None:
            found.append(self.names[parent])
            parent = self.parents.get(parent)
        return found


async def test_the_expert_runs_as_a_child_of_the_tool_call(
    settings_with_expert: Settings,
    main_model: ScriptedChatModel,
    expert_model: CapturingExpertModel,
) -> None:
    """Langfuse nests spans by these parent run ids: the expert is a span of the turn."""
    tree = RunTree()
    agent = agent_factory(
        settings_with_expert, main_model, KeywordRetriever(ARTICLES), expert_model=expert_model
    )("staff")
    await agent.ainvoke(
        {"messages": [HumanMessage("Ann: When was GnuCash 5.9 released?")]},
        config={"callbacks": [tree]},
        context=MemoryContext(0, None),
    )

    expert_calls = [r for r in tree.chat_models if ASK_EXPERT in tree.ancestors(r)]
    assert len(expert_calls) == 3
    assert all("expert" in tree.ancestors(r) for r in expert_calls)
