"""The real bot (python-telegram-bot Application, handlers, rate limiter) against the fake
Bot API, over a real ChatService on SQLite with the capturing offline model."""

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.answers.service import AnswerService
from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.db import migrate
from app.db.engine import make_async_engine, make_session_factory
from app.runtime import agent_factory
from app.settings import Settings, TelegramSettings
from bot.application import ALLOWED_UPDATES, BotApplication, build_application
from knowledge.types import Passage
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever
from tests.telegram.fake_bot_api import TOKEN, FakeBotApi, serve

STAFF_CHAT = -1002
PASSAGES = [
    *ARTICLES,
    Passage(
        text="Filter the report rows where amount < 100 & status is open.",
        title="Filters & reports",
        heading="Filters & reports",
        source="https://docs.example.com/filters?kind=report&lang=en",
    ),
    Passage(
        text=" ".join(
            f"Step {n} of the year-end closing checklist: reconcile the ledger accounts "
            f"and confirm every balance before you continue."
            for n in range(1, 61)
        ),
        title="Year-end closing",
        heading="Year-end closing > Checklist",
        source="en/year-end.md",
    ),
]

RunBot = Callable[[], AbstractAsyncContextManager[BotApplication]]


@pytest.fixture
async def bot_api() -> AsyncIterator[FakeBotApi]:
    async with serve(FakeBotApi()) as api:
        yield api


@pytest.fixture
def model() -> CapturingChatModel:
    return CapturingChatModel()


@pytest.fixture
def bot_settings(settings: Settings, bot_api: FakeBotApi) -> Settings:
    settings.telegram = TelegramSettings(
        token=TOKEN,
        api_base_url=f"{bot_api.url}/bot",
        file_base_url=f"{bot_api.url}/file/bot",
        staff_chat_ids=[STAFF_CHAT],
    )
    return settings


@pytest.fixture
async def sessions(bot_settings: Settings) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    migrate.upgrade(bot_settings.db.url, "heads")
    engine = make_async_engine(bot_settings.db)
    yield make_session_factory(engine)
    await engine.dispose()


@pytest.fixture
def service(
    bot_settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    model: CapturingChatModel,
) -> ChatService:
    engine = sessions.kw["bind"]
    agents = agent_factory(bot_settings, model, KeywordRetriever(PASSAGES))
    return ChatService(bot_settings, TurnStore(engine), agents)


@asynccontextmanager
async def polling_bot(
    settings: Settings,
    service: ChatService,
    sessions: async_sessionmaker[AsyncSession],
    answers: AnswerService | None = None,
) -> AsyncIterator[BotApplication]:
    """A bot process on the fake Bot API with long polling, until the block ends."""
    application = build_application(settings, service, sessions, polling=True, answers=answers)
    async with application:
        await application.start()
        assert application.updater is not None
        await application.updater.start_polling(
            poll_interval=0, timeout=1, allowed_updates=ALLOWED_UPDATES
        )
        try:
            yield application
        finally:
            await application.updater.stop()
            await application.stop()


@pytest.fixture
def run_bot(
    bot_settings: Settings, service: ChatService, sessions: async_sessionmaker[AsyncSession]
) -> RunBot:
    """Start a bot process with long polling; each call is a fresh process on the same
    database."""

    def running() -> AbstractAsyncContextManager[BotApplication]:
        return polling_bot(bot_settings, service, sessions)

    return running
