"""A ChatService with handoffs on SQLite: the capturing offline model over the test
articles, office hours read from a fixed clock (Wednesday 10:00 UTC: the office is open)."""

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.db import migrate
from app.db.engine import make_async_engine
from app.handoff.service import HandoffService
from app.runtime import agent_factory
from app.settings import Settings
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever
from tests.observability.conftest import local_server

OFFICE_OPEN = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)  # a Wednesday
OFFICE_CLOSED = datetime(2026, 12, 4, 19, 30, tzinfo=UTC)  # Friday evening
WEEKDAYS = [0, 1, 2, 3, 4]  # office hours: none unless configured


@pytest.fixture
def model() -> CapturingChatModel:
    return CapturingChatModel()


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[AsyncEngine]:
    migrate.upgrade(settings.db.url)
    engine = make_async_engine(settings.db)
    yield engine
    await engine.dispose()


@pytest.fixture
def turns(engine: AsyncEngine) -> TurnStore:
    return TurnStore(engine)


@pytest.fixture
def handoffs(settings: Settings, turns: TurnStore) -> HandoffService:
    settings.handoff.office_days = WEEKDAYS
    return HandoffService(settings, turns, now=lambda: OFFICE_OPEN)


@pytest.fixture
def chat(
    settings: Settings, turns: TurnStore, handoffs: HandoffService, model: CapturingChatModel
) -> ChatService:
    agents = agent_factory(settings, model, KeywordRetriever(ARTICLES))
    return ChatService(settings, turns, agents, handoffs=handoffs)


__all__ = ["local_server"]  # the local Langfuse endpoint of the observability tests
