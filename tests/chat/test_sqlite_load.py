"""SQLite under concurrent conversations: no turn fails for "database is locked", no user
message is lost, none is left running."""

import asyncio

from sqlalchemy import func, select

from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnRequest
from app.db import migrate
from app.db.engine import make_async_engine
from app.db.models import Message, Turn
from app.runtime import agent_factory
from app.settings import Settings
from tests.chat.fakes import SlowModel
from tests.fakes import ARTICLES, KeywordRetriever

CONVERSATIONS = 50
QUESTIONS = ["How do I create an invoice?", "How do I record a payment?", "Where is VAT set?"]


async def test_fifty_concurrent_conversations_lose_nothing(settings: Settings) -> None:
    migrate.upgrade(settings.db.url)
    engine = make_async_engine(settings.db)
    store = TurnStore.for_engine(engine, settings.db)
    service = ChatService(
        settings, store, agent_factory(settings, SlowModel(), KeywordRetriever(ARTICLES))
    )

    async def converse(n: int) -> list[int]:
        return [
            (await service.handle_turn(TurnRequest("api", f"load:{n}", "client", f"u{n}", q))).turn
            for q in QUESTIONS
        ]

    try:
        answered = await asyncio.gather(*(converse(n) for n in range(CONVERSATIONS)))
        async with store.sessions() as session:
            rows = await session.execute(select(Turn.status, func.count()).group_by(Turn.status))
            statuses = {status: count for status, count in rows.all()}
            users = await session.scalar(
                select(func.count()).select_from(Message).where(Message.role == "user")
            )
    finally:
        await engine.dispose()

    assert answered == [[1, 2, 3]] * CONVERSATIONS
    assert statuses == {"ok": CONVERSATIONS * len(QUESTIONS)}
    assert users == CONVERSATIONS * len(QUESTIONS)
