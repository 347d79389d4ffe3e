"""`recall_history` across a person's conversations: a new conversation of the same memory
scope finds what left the context of the person's earlier ones, named by conversation;
another tenant's person of the same id, and a conversation without a person, find none of
it. Through ChatService on PostgreSQL (rolled back per test), the tool's exact text."""

import re

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from app.agent.memory.profiles import SummaryPolicy
from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnRequest
from app.db.models import Conversation, Message
from app.memory import store
from app.memory.scope import api_scope
from app.runtime import agent_factory
from app.settings import Settings
from tests.fakes import ARTICLES, KeywordRetriever
from tests.memory.test_profiles import RecallingModel

HEADER = re.compile(r"^\[recall id [^\n]*$", re.M)
ACME = api_scope("api:acme:", "p-17")
GLOBEX = api_scope("api:globex:", "p-17")  # the same person id under another API key


@pytest.fixture
def model() -> RecallingModel:
    return RecallingModel()


@pytest.fixture
def service(
    settings: Settings, pg_connection: AsyncConnection, model: RecallingModel
) -> ChatService:
    settings.profiles.definitions["client"].summary = SummaryPolicy(
        trigger_exchanges=2, keep_exchanges=1
    )
    return ChatService(
        settings,
        TurnStore(pg_connection),
        agent_factory(settings, model, KeywordRetriever(ARTICLES)),
    )


async def said(service: ChatService, key: str, scope: str | None, *texts: str) -> str:
    reply = ""
    for text in texts:
        request = TurnRequest("api", key, "client", "Ann", text, memory_scope=scope)
        reply = (await service.handle_turn(request)).text
    return reply


async def folded_statement(service: ChatService, key: str, scope: str, statement: str) -> None:
    """`statement`, then two questions: the third turn folds it out of the context."""
    await said(service, key, scope, statement, "How do I create an invoice?",
               "How do I record a payment?")  # fmt: skip


async def user_message_id(sessions: async_sessionmaker[AsyncSession], key: str) -> int:
    async with sessions() as session:
        found = await session.scalar(
            select(Message.id)
            .join(Conversation, Conversation.id == Message.conversation_id)
            .where(Conversation.key == key, Message.turn == 1, Message.role == "user")
        )
    assert found is not None
    return found


async def test_a_new_conversation_recalls_the_persons_earlier_ones_and_no_one_elses(
    service: ChatService, model: RecallingModel, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    await folded_statement(
        service, "api:acme:1", ACME, "Our invoice printer is a Brother HL-2350 in room 4."
    )
    await folded_statement(
        service, "api:globex:1", GLOBEX, "Our invoice printer is a Brother HL-5100 in room 9."
    )
    acme_id = await user_message_id(pg_sessions, "api:acme:1")

    model.calls.clear()
    recalled = await said(service, "api:acme:2", ACME, "recall: Brother printer room")
    offered = [t["function"]["name"] for t in model.calls[0].tools]
    assert "recall_history" in offered  # from the first turn: the person has an archive
    statement = (
        f"[recall id {acme_id}, conversation api:acme:1, turn 1, user]\n"
        "Our invoice printer is a Brother HL-2350 in room 4."
    )
    assert statement in recalled.split("\n\n")
    # every piece is of Acme's earlier conversation (its search for the words too)
    assert [h.split(", turn")[0] for h in HEADER.findall(recalled)] == [
        f"[recall id {acme_id + 2}, conversation api:acme:1",
        f"[recall id {acme_id}, conversation api:acme:1",
    ]
    assert "HL-5100" not in recalled
    # By recall id too, within the scope only.
    assert await said(service, "api:acme:2", ACME, f"recall: {acme_id}") == statement
    globex_id = await user_message_id(pg_sessions, "api:globex:1")
    nothing = "Nothing in the archive matches."
    assert await said(service, "api:acme:2", ACME, f"recall: {globex_id}") == nothing
    assert await said(service, "api:globex:2", GLOBEX, f"recall: {globex_id}") == (
        f"[recall id {globex_id}, conversation api:globex:1, turn 1, user]\n"
        "Our invoice printer is a Brother HL-5100 in room 9."
    )
    # A conversation without a person has no archive but its own: no tool offered.
    model.calls.clear()
    await said(service, "api:acme:3", None, "How do I create an invoice?")
    assert "recall_history" not in [t["function"]["name"] for t in model.calls[0].tools]


async def test_the_conversations_own_archive_comes_first_among_equals(
    service: ChatService, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    await folded_statement(service, "api:acme:1", ACME, "Our printer is a Brother in room 4.")
    await folded_statement(service, "api:acme:2", ACME, "Our printer is a Brother in room 7.")
    own = await user_message_id(pg_sessions, "api:acme:2")
    other = await user_message_id(pg_sessions, "api:acme:1")
    recalled = await said(service, "api:acme:2", ACME, "recall: Brother room")
    # the same words in both: this conversation's statement and search first, then the
    # newest of the earlier conversation's, within the three pieces a call shows
    assert [h.split(": [cleared")[0] for h in HEADER.findall(recalled)] == [
        f"[recall id {own + 2}, turn 1, tool",
        f"[recall id {own}, turn 1, user]",
        f"[recall id {other + 2}, conversation api:acme:1, turn 1, tool",
    ]


async def test_a_forgotten_fact_leaves_every_archive_of_the_person(
    service: ChatService, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    statement = "Our invoice printer is a Brother HL-2350 in room 4."
    await folded_statement(service, "api:acme:1", ACME, statement)  # remembered from here
    await folded_statement(service, "api:acme:2", ACME, statement)  # said again, archived
    async with pg_sessions() as session:
        assert [i.text for i in await store.active_items(session, [ACME])] == [statement]
        assert (await store.forget(session, ACME)).items == 1
        await session.commit()
    recalled = await said(service, "api:acme:3", ACME, "recall: Brother printer room")
    assert recalled == "Nothing in the archive matches."
