"""With Langfuse on, a 👍 in Telegram is the `user_feedback` score of the turn's trace (the
local endpoint stands in for Langfuse)."""

import json
import uuid

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.observability.tracing import Tracer
from app.runtime import agent_factory
from app.settings import LangfuseSettings, Settings
from tests.fakes import CapturingChatModel, KeywordRetriever
from tests.observability.conftest import LocalServer, local_server
from tests.observability.test_tracing import SCORES_PATH
from tests.telegram.conftest import PASSAGES, RunBot
from tests.telegram.fake_bot_api import FakeBotApi, chat, user

__all__ = ["local_server"]  # the Langfuse stand-in, a fixture of the observability tests


@pytest.fixture
def tracer(bot_settings: Settings, local_server: LocalServer) -> Tracer:
    bot_settings.langfuse = LangfuseSettings(
        public_key=f"pk-lf-{uuid.uuid4().hex}", secret_key="sk-lf-test", base_url=local_server.url
    )
    return Tracer.from_settings(bot_settings)


@pytest.fixture
def service(
    bot_settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    model: CapturingChatModel,
    tracer: Tracer,
) -> ChatService:
    agents = agent_factory(bot_settings, model, KeywordRetriever(PASSAGES))
    return ChatService(bot_settings, TurnStore(sessions.kw["bind"]), agents, tracer=tracer)


async def test_a_thumbs_up_is_the_user_feedback_score_of_the_turns_trace(
    bot_api: FakeBotApi, run_bot: RunBot, tracer: Tracer, local_server: LocalServer
) -> None:
    ann = user(11, "Ann", "Lee")
    async with run_bot():
        bot_api.push(bot_api.message(chat(11), ann, "How do I create an invoice?"))
        await bot_api.wait_for_messages(1)
        await bot_api.wait_for_answered_callback(bot_api.click(ann, bot_api.bot_messages[0], "👍"))
    tracer.flush()

    scores = [s for body in local_server.bodies(SCORES_PATH) for s in json.loads(body)]
    (feedback,) = [s for s in scores if s["name"] == "user_feedback"]
    assert feedback["value"] == 1.0
    traced = {s["traceId"] for s in scores if s["name"] == "context_tokens"}
    assert traced == {feedback["traceId"]}
