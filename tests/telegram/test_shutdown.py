"""Stopping the bot (what SIGTERM does to `telegram run`) with a turn in flight: the turn
finishes and its answer is delivered before the bot stops, within the grace period; a turn
that outlasts it is cancelled, and stopping does not wait for it."""

import asyncio
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from app.settings import Settings
from tests.fakes import CapturingChatModel
from tests.telegram.conftest import RunBot
from tests.telegram.fake_bot_api import FakeBotApi, chat, user

ANN = user(11, "Ann", "Lee")


class SlowModel(CapturingChatModel):
    """The offline model, answering `seconds` after a call starts; `called` is set then."""

    seconds: float = 1.0
    called: Any = None

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        self.called.set()
        await asyncio.sleep(self.seconds)
        return self._generate(messages, *args, **kwargs)


@pytest.fixture
def model() -> SlowModel:
    return SlowModel(called=asyncio.Event())


async def test_stopping_lets_a_running_turn_finish_and_deliver_its_answer(
    bot_api: FakeBotApi, run_bot: RunBot, model: SlowModel
) -> None:
    question = bot_api.message(chat(11), ANN, "How do I create an invoice?")
    async with run_bot():
        bot_api.push(question)
        await asyncio.wait_for(model.called.wait(), 10)
    # The block's end stopped the bot while the model was still thinking.
    (reply,) = bot_api.replies_to(question)
    assert "Sales → Invoices → New invoice" in reply["text"]


async def test_a_turn_that_outlasts_the_grace_period_is_left_for_the_next_start(
    bot_api: FakeBotApi, run_bot: RunBot, bot_settings: Settings, model: SlowModel
) -> None:
    bot_settings.telegram.shutdown_grace_seconds = 0.5
    model.seconds = 60  # far beyond the test's own time-out
    question = bot_api.message(chat(11), ANN, "How do I create an invoice?")
    async with asyncio.timeout(30):
        async with run_bot():
            bot_api.push(question)
            await asyncio.wait_for(model.called.wait(), 10)
    assert bot_api.replies_to(question) == []
