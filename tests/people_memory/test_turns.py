"""Memory across conversations, through ChatService on PostgreSQL (rolled back per test),
with the exact requests the model received captured."""

from datetime import UTC, datetime, timedelta

import pytest
from langchain_core.messages import BaseMessage, SystemMessage
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from app.agent.memory.prefix import extends
from app.agent.memory.profiles import SummaryPolicy
from app.agent.memory.recall import ConversationArchive
from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnRequest
from app.db import queries
from app.db.models import Conversation, LLMCall, MemoryItem, Message, Summary
from app.memory import store
from app.memory.scope import api_scope, telegram_scope, widget_scope
from app.memory.store import FORGOTTEN
from app.memory.turns import PeopleMemory
from app.runtime import agent_factory
from app.settings import Settings
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever
from tests.people_memory.test_block import block_of

ACME = api_scope("api:acme:", "p-17")


@pytest.fixture
def model() -> CapturingChatModel:
    return CapturingChatModel()


@pytest.fixture
def service(
    settings: Settings, pg_connection: AsyncConnection, model: CapturingChatModel
) -> ChatService:
    retriever = KeywordRetriever(ARTICLES)
    return ChatService(
        settings, TurnStore(pg_connection), agent_factory(settings, model, retriever)
    )


def ask(key: str, text: str, scope: str | None, author: str | None = "Ann") -> TurnRequest:
    return TurnRequest("api", key, "client", author, text, memory_scope=scope)


def system_blocks(message: BaseMessage) -> list[str]:
    assert isinstance(message, SystemMessage)
    content = message.content
    return [content] if isinstance(content, str) else [b["text"] for b in content]  # type: ignore[index]


async def test_a_returning_person_gets_the_block_once_and_the_same_prefix_each_turn(
    service: ChatService, model: CapturingChatModel, settings: Settings
) -> None:
    await service.handle_turn(ask("api:acme:1", "Remember that our currency is CHF.", ACME))
    model.calls.clear()

    await service.handle_turn(ask("api:acme:2", "How do I create an invoice?", ACME))
    first_turn = [call.messages for call in model.calls]
    model.calls.clear()
    await service.handle_turn(ask("api:acme:2", "How do I record a payment?", ACME))

    sent = first_turn[0][0]
    assert isinstance(sent, SystemMessage)
    assert system_blocks(sent) == [settings.chat.system_prompt, block_of("our currency is CHF")]
    # The second turn's first request starts with everything the first turn sent last.
    assert extends(first_turn[-1], model.calls[0].messages)


async def test_memory_stays_in_its_tenant_chat_and_staff_member(
    service: ChatService, model: CapturingChatModel, settings: Settings
) -> None:
    remembered = {
        ACME: "api:acme:1",
        telegram_scope(-100, 5): "tg-1",
        widget_scope("alice"): "widget:alice:1",
    }
    for scope, key in remembered.items():
        await service.handle_turn(ask(key, "Remember that our currency is CHF", scope))
    strangers: dict[str | None, str] = {
        api_scope("api:globex:", "p-17"): "api:globex:1",  # the same person id, another key
        telegram_scope(-200, 5): "tg-2",  # the same user in another chat
        widget_scope("bob"): "widget:bob:1",
        None: "api:acme:3",  # no person given
    }
    for stranger, key in strangers.items():
        model.calls.clear()
        await service.handle_turn(ask(key, "Which currency do we use?", stranger))
        assert system_blocks(model.calls[0].messages[0]) == [settings.chat.system_prompt], stranger


async def said_ids(sessions: async_sessionmaker[AsyncSession], key: str) -> list[int]:
    """The ids of the conversation's user messages, in order."""
    async with sessions() as session:
        return list(
            await session.scalars(
                select(Message.id)
                .join(Conversation, Conversation.id == Message.conversation_id)
                .where(Conversation.key == key, Message.role == "user")
                .order_by(Message.seq)
            )
        )


async def test_a_telegram_chat_shares_what_others_said_and_memory_can_be_off(
    service: ChatService,
    model: CapturingChatModel,
    settings: Settings,
    pg_sessions: async_sessionmaker[AsyncSession],
) -> None:
    ann, dora = telegram_scope(-100, 1), telegram_scope(-100, 4)
    for author, scope, text in [
        ("Ann", ann, "Bob said: our company is a GmbH in Munich. We run GnuCash 4 on Linux."),
        ("Dora", dora, "We have two offices, one in Graz."),
    ]:
        await service.handle_turn(
            TurnRequest("telegram", "telegram:-100", "client", author, text, memory_scope=scope)
        )
    ann_said, dora_said = await said_ids(pg_sessions, "telegram:-100")
    summary = (
        "Summary of the earlier conversation (#N = recall id for recall_history)\n"
        "Participants: Ann, Bob, Dora\n"
        "Facts and constraints users stated:\n"
        f"- Ann: we run GnuCash 4 on Linux (#{ann_said})\n"
        f"- Bob: our company is a GmbH in Munich (#{ann_said})\n"
        f"- Ann: we have two offices, one in Graz (#{dora_said})\n"  # Dora's, named Ann
        "- Ann: we pay in euros\n"  # no source: nobody's
    )
    people = PeopleMemory(settings.memory)
    async with pg_sessions() as session:
        conversation = await queries.get_conversation(session, "telegram:-100")
        assert conversation is not None
        folded = {str(i): [i] for i in (ann_said, dora_said)}
        await people.write(session, ann, conversation, None, summary, folded)
        await session.commit()
    async with pg_sessions() as session:
        scopes = [ann, dora, "telegram|-100|*"]
        kept = {(i.scope, i.text) for i in await store.active_items(session, scopes)}
    assert kept == {
        (ann, "we run GnuCash 4 on Linux"),
        ("telegram|-100|*", "Bob: our company is a GmbH in Munich"),
        ("telegram|-100|*", "Ann: we have two offices, one in Graz"),
    }
    model.calls.clear()
    await service.handle_turn(
        TurnRequest("telegram", "telegram:-100:new", "client", "Carl", "Hi, a question on VAT",
                    memory_scope=telegram_scope(-100, 9))
    )  # fmt: skip
    assert "Bob: our company is a GmbH in Munich" in system_blocks(model.calls[0].messages[0])[1]

    settings.memory.audiences = []
    model.calls.clear()
    await service.handle_turn(ask("tg-new", "Hi, a question on VAT", ann))
    assert system_blocks(model.calls[0].messages[0]) == [settings.chat.system_prompt]


async def fold_after(service: ChatService, settings: Settings, statement: str) -> None:
    """`statement`, then two questions: the third turn folds the first exchange."""
    settings.profiles.definitions["client"].summary = SummaryPolicy(
        trigger_exchanges=2, keep_exchanges=1
    )
    for text in [statement, "How do I create an invoice?", "How do I record a payment?"]:
        await service.handle_turn(ask("api:acme:1", text, ACME))


async def test_a_fold_writes_the_facts_it_extracted_without_another_model_call(
    service: ChatService, settings: Settings, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    await fold_after(service, settings, "We run GnuCash 4 on Linux at our office.")
    async with pg_sessions() as session:
        items = await store.active_items(session, [ACME])
        purposes = list(await session.scalars(select(LLMCall.purpose)))
        folds = len(list(await session.scalars(select(Summary.id))))
    assert folds >= 1 and purposes.count("summary") == folds  # the folds' own calls only
    assert [(i.text, i.kind) for i in items] == [
        ("We run GnuCash 4 on Linux at our office.", "run gnucash")
    ]
    assert items[0].source_message_id is not None


async def test_a_folded_remember_that_is_not_kept_twice(
    service: ChatService, settings: Settings, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    await fold_after(service, settings, "Remember that I prefer short answers in bullet points.")
    async with pg_sessions() as session:
        items = await store.active_items(session, [ACME])
        folds = len(list(await session.scalars(select(Summary.id))))
    assert folds >= 1
    assert [i.text for i in items] == ["I prefer short answers in bullet points"]


async def test_a_forgotten_fact_does_not_come_back_with_the_next_fold(
    service: ChatService, settings: Settings, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    await fold_after(service, settings, "We run GnuCash 4 on Linux at our office.")
    async with pg_sessions() as session:
        assert (await store.forget(session, ACME)).items == 1
        await session.commit()
    for text in ["How do I reconcile the bank?", "How do I close the year?"]:
        await service.handle_turn(ask("api:acme:1", text, ACME))
    async with pg_sessions() as session:
        folds = len(list(await session.scalars(select(Summary.id))))
        items = await store.active_items(session, [ACME])
    assert folds >= 2  # a later fold, whose summary still lists the forgotten fact
    assert items == []


async def test_forget_removes_the_items_and_their_recall_hits(
    service: ChatService, settings: Settings, pg_sessions: async_sessionmaker[AsyncSession]
) -> None:
    await fold_after(service, settings, "Our invoice printer is a Brother HL-2350 in room 4.")
    sessions = pg_sessions
    async with sessions() as session:
        conversation = await session.scalar(
            select(Conversation).where(Conversation.key == "api:acme:1")
        )
        assert conversation is not None
    archive = ConversationArchive(sessions, conversation.id)
    found = [m.content for m in await archive.search("Brother printer")]
    assert "Our invoice printer is a Brother HL-2350 in room 4." in found
    assert len(found) == 2  # and the search result that quotes it

    async with sessions() as session:
        assert not await store.forget(session, api_scope("api:globex:", "p-17"))
        assert (await store.forget(session, ACME)).items == 1
        await session.commit()
        assert await store.active_items(session, [ACME]) == []
    assert await archive.search("Brother printer") == []
    async with sessions() as session:  # the transcript keeps the conversation's shape
        archived = await queries.archived_messages(session, conversation.id)
    assert sum(m.content == FORGOTTEN for m in archived) == 2


async def test_items_not_used_within_the_retention_expire(
    pg_sessions: async_sessionmaker[AsyncSession],
) -> None:
    async with pg_sessions() as session:
        old = await store.remember(session, ACME, "our currency is CHF", conversation=None,
                                   message_id=None, max_items=10)  # fmt: skip
        fresh = await store.remember(session, ACME, "we use GnuCash 5", conversation=None,
                                     message_id=None, max_items=10)  # fmt: skip
        assert old and fresh
        await session.execute(
            update(MemoryItem)
            .where(MemoryItem.id == old.id)
            .values(last_used_at=datetime.now(UTC) - timedelta(days=31))
        )
        assert await store.expire(session, [ACME], retention_days=30) == 1
        assert [i.text for i in await store.active_items(session, [ACME])] == ["we use GnuCash 5"]
