"""Every profile over the 42-turn client session, through ChatService on PostgreSQL, with a
capturing model: what was sent each turn, prefix stability, pairs, facts, recall."""

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from app.agent.memory.middleware import with_summary
from app.agent.memory.prefix import TurnRequests, message_key
from app.agent.memory.prefix import prefix_changes as changed_turns
from app.agent.messages import message_text
from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.transcript import to_langchain
from app.chat.types import TurnRequest, UnknownProfile
from app.db import queries
from app.db.models import LLMCall, Summary
from app.runtime import agent_factory
from app.settings import ProfilesSettings, Settings
from evals.profiles import comparison_profiles
from knowledge.types import Passage
from tests.fakes import CapturingChatModel, KeywordRetriever
from tests.memory.conftest import CONSTRAINT, SHORT_ANSWERS, session_turns

KEY = "telegram:-100"
KEEPS_EVERYTHING_SAID = ("baseline", "clearing", "hybrid", "client")
TRIMS = ("trim+clear", "trim-naive", "staff", "forget-all")


class RecallingModel(CapturingChatModel):
    """Calls recall_history for messages that start with `recall:`, else the offline way."""

    def _reply(self, messages: list[BaseMessage], tool_names: set[str]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and "recall: " in message_text(last):
            query = message_text(last).split("recall: ", 1)[1]
            call = {"name": "recall_history", "args": {"query": query}, "id": "recall1"}
            return AIMessage(content="", tool_calls=[call])
        if isinstance(last, ToolMessage) and last.name == "recall_history":
            return AIMessage(content=message_text(last))
        return super()._reply(messages, tool_names)


def service_for(
    profile: str,
    settings: Settings,
    bind: AsyncConnection,
    model: CapturingChatModel,
    passages: list[Passage],
    **profile_overrides: Any,
) -> ChatService:
    definitions = {name: p.model_dump() for name, p in comparison_profiles().items()}
    if profile_overrides:
        definitions[profile] = {**definitions.get(profile, {}), **profile_overrides}
    profiles = ProfilesSettings(
        by_audience={"client": profile, "staff": profile}, definitions=definitions
    )
    settings = settings.model_copy(update={"profiles": profiles})
    agents = agent_factory(settings, model, KeywordRetriever(passages))
    return ChatService(settings, TurnStore(bind), agents)


def ask(author: str, text: str) -> TurnRequest:
    return TurnRequest("telegram", KEY, "client", author, text)


async def stored_context(sessions: async_sessionmaker[AsyncSession]) -> list[BaseMessage]:
    """What the next turn will start from: system prompt, summary, kept messages."""
    async with sessions() as session:
        conversation = await queries.get_conversation(session, KEY)
        assert conversation is not None
        stored = await queries.context_messages(session, conversation)
        summary = await queries.latest_summary(session, conversation)
    system = with_summary(SystemMessage(""), summary.text) if summary else SystemMessage("")
    return [system, *(to_langchain(m) for m in stored)]


def assert_pairs_intact(request: list[BaseMessage]) -> None:
    called: set[str] = set()
    for message in request:
        if isinstance(message, AIMessage):
            called |= {c["id"] for c in message.tool_calls if c["id"]}
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in called, "a tool result without its call"
    assert not isinstance(request[1], ToolMessage)


def keys(messages: list[BaseMessage]) -> list[tuple[str, str, str]]:
    """Message keys without the system prompt's text (the summary part stays)."""
    found = [message_key(m) for m in messages]
    system = messages[0]
    if isinstance(system.content, list):
        found[0] = message_key(SystemMessage(content=system.content[1:]))
    else:
        found[0] = ("system", "", "")
    return found


async def run_session(
    service: ChatService, model: CapturingChatModel, sessions: async_sessionmaker[AsyncSession]
) -> list[list[list[BaseMessage]]]:
    """The requests of each turn; checks every turn sent exactly what was then stored."""
    turns: list[list[list[BaseMessage]]] = []
    for turn in session_turns():
        first_call = len(model.calls)
        reply = await service.handle_turn(ask(turn["user"], turn["text"]))
        requests = [call.messages for call in model.calls[first_call:]]
        turns.append(requests)
        for request in requests:
            assert_pairs_intact(request)
        # the last request plus the answer is exactly the context the next turn starts from
        sent = [*requests[-1], AIMessage(reply.text)]
        assert keys(sent) == keys(await stored_context(sessions))
    return turns


def prefix_changes(turns: list[list[list[BaseMessage]]]) -> int:
    return len(changed_turns([TurnRequests(n, requests) for n, requests in enumerate(turns)]))


@pytest.mark.parametrize("profile", [*KEEPS_EVERYTHING_SAID, *TRIMS])
async def test_forty_turns_under_each_profile(
    profile: str,
    settings: Settings,
    pg_sessions: async_sessionmaker[AsyncSession],
    pg_connection: AsyncConnection,
    kb_passages: list[Passage],
) -> None:
    model = CapturingChatModel()
    service = service_for(profile, settings, pg_connection, model, kb_passages)
    turns = await run_session(service, model, pg_sessions)

    last = turns[-1][0]
    seen = " ".join(message_text(m) for m in last)
    if profile in KEEPS_EVERYTHING_SAID:  # in the summary or verbatim
        assert CONSTRAINT in seen and SHORT_ANSWERS in seen
    else:
        assert CONSTRAINT not in seen  # trimming loses it from the context ...
    changed = changed_turns([TurnRequests(n, requests) for n, requests in enumerate(turns)])
    if profile == "baseline":
        assert changed == []
        earlier = session_turns()[:-1]
        # a turn that searched called the model twice (small talk is answered at once)
        searched = sum(len(requests) > 1 for requests in turns[:-1])
        assert 0 < searched <= len(earlier)
        # system, questions (the last one too), answers, searches
        assert len(last) == 1 + len(earlier) + 1 + len(earlier) + 2 * searched
    elif profile in ("trim-naive", "forget-all"):  # per-turn trimming: once full, nearly
        # every turn rewrites the prefix (a short greeting may fit without a trim)
        assert changed[0] < 10 and len(changed) >= 0.9 * (len(turns) - changed[0])
    else:  # batched decisions: the prefix holds for several turns between two of them
        assert 0 < len(changed) <= len(turns) // 3
    async with pg_sessions() as session:
        summaries = list(await session.scalars(select(Summary).order_by(Summary.id)))
        purposes = list(await session.scalars(select(LLMCall.purpose)))
    assert (purposes.count("summary") > 0) == (profile in ("hybrid", "client"))
    assert len(summaries) == purposes.count("summary")


async def test_cache_aware_profiles_change_the_prefix_far_less_than_naive_trimming(
    settings: Settings,
    pg_sessions: async_sessionmaker[AsyncSession],
    pg_connection: AsyncConnection,
    kb_passages: list[Passage],
) -> None:
    changes = {}
    for profile in ("trim-naive", "staff", "client"):
        model = CapturingChatModel()
        service = service_for(profile, settings, pg_connection, model, kb_passages)
        turns = []
        for turn in session_turns():
            first_call = len(model.calls)
            await service.handle_turn(
                TurnRequest("telegram", f"{KEY}:{profile}", "client", turn["user"], turn["text"])
            )
            turns.append([call.messages for call in model.calls[first_call:]])
        assert len(turns) == len(session_turns())
        changes[profile] = prefix_changes(turns)
    # Both do change the prefix (their decisions fire), at most a third as often.
    assert 0 < changes["staff"] * 3 <= changes["trim-naive"]
    assert 0 < changes["client"] * 3 <= changes["trim-naive"]


async def test_a_summary_is_reused_unchanged_until_the_next_fold(
    settings: Settings,
    pg_sessions: async_sessionmaker[AsyncSession],
    pg_connection: AsyncConnection,
    kb_passages: list[Passage],
) -> None:
    model = CapturingChatModel()
    service = service_for("client", settings, pg_connection, model, kb_passages)
    turns = await run_session(service, model, pg_sessions)
    systems = [requests[0][0].content for requests in turns]
    distinct = [s for i, s in enumerate(systems) if i == 0 or s != systems[i - 1]]
    async with pg_sessions() as session:
        summaries = list(await session.scalars(select(Summary).order_by(Summary.id)))
    assert len(distinct) == 1 + len(summaries)  # the prompt alone, then one per fold
    assert [s[1]["text"] for s in distinct[1:]] == [s.text for s in summaries]  # type: ignore[index]
    assert summaries[0].through_seq < summaries[-1].through_seq


async def test_recall_history_finds_a_cleared_result(
    settings: Settings,
    pg_sessions: async_sessionmaker[AsyncSession],
    pg_connection: AsyncConnection,
    kb_passages: list[Passage],
) -> None:
    model = RecallingModel()
    service = service_for(
        "clearing",
        settings,
        pg_connection,
        model,
        kb_passages,
        clearing={"trigger_tokens": 0, "keep": 0, "clear_at_least": 0},
    )
    await service.handle_turn(ask("Ann", "How do I import a bank CSV file?"))
    assert "recall_history" not in [t["function"]["name"] for t in model.calls[-1].tools]
    await service.handle_turn(ask("Bob", "Where is the budget report?"))
    await service.handle_turn(ask("Ann", "How do I lock a period?"))
    tools = [t["function"]["name"] for t in model.calls[-1].tools]
    assert sorted(tools) == ["recall_history", "search_knowledge_base"]  # now there is an archive

    sent = model.calls[-1].messages
    placeholders = [m.content for m in sent if isinstance(m, ToolMessage)][:2]
    async with pg_sessions() as session:
        conversation = await queries.get_conversation(session, KEY)
        assert conversation is not None
        stored = [m for m in await queries.all_messages(session, conversation) if m.role == "tool"]
    assert placeholders == [
        f'[cleared: search_knowledge_base("How do I import a bank CSV file?") → 4 passages, '
        f"recall id {stored[0].id}]",
        f'[cleared: search_knowledge_base("Where is the budget report?") → 4 passages, '
        f"recall id {stored[1].id}]",
    ]
    assert [m.context_state for m in stored] == ["cleared", "cleared", "active"]

    reply = await service.handle_turn(ask("Ann", "recall: import bank CSV"))
    assert stored[0].content in reply.text  # the full result, not the placeholder
    reply = await service.handle_turn(ask("Ann", f"recall: recall id {stored[1].id}"))
    assert reply.text.startswith(f"[recall id {stored[1].id}, turn 2, tool")


async def test_profile_can_be_overridden_per_conversation(
    settings: Settings,
    pg_sessions: async_sessionmaker[AsyncSession],
    pg_connection: AsyncConnection,
    kb_passages: list[Passage],
) -> None:
    service = service_for("client", settings, pg_connection, CapturingChatModel(), kb_passages)
    assert not await service.set_profile(KEY, "staff")
    reply = await service.handle_turn(ask("Ann", "How do I import a bank CSV file?"))
    assert reply.profile == "client"
    assert await service.set_profile(KEY, "baseline")
    reply = await service.handle_turn(ask("Ann", "How do I lock a period?"))
    assert reply.profile == "baseline"
    with pytest.raises(UnknownProfile, match="unknown memory profile 'fancy'"):
        await service.set_profile(KEY, "fancy")
