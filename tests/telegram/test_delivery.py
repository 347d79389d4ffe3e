"""At-least-once delivery: the fake Bot API refuses sends (5xx, 429, 400, or every send
until the bot restarts) and the answer still arrives exactly once, its state recorded."""

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import TelegramDelivery
from app.observability.metrics import REGISTRY
from app.settings import Settings
from bot.handlers import APOLOGY
from tests.telegram.conftest import RunBot
from tests.telegram.fake_bot_api import FakeBotApi, chat, user

PRIVATE = chat(11)
ANN = user(11, "Ann", "Lee")
UNDELIVERED = "supportbot_telegram_undelivered_total"


async def states(sessions: async_sessionmaker[AsyncSession]) -> list[tuple[str, int]]:
    async with sessions() as session:
        rows = await session.scalars(select(TelegramDelivery).order_by(TelegramDelivery.turn_id))
        return [(d.state, d.parts_sent) for d in rows]


def undelivered() -> float:
    return REGISTRY.get_sample_value(UNDELIVERED) or 0.0


async def test_a_500_on_send_is_retried_and_the_answer_delivered(
    bot_api: FakeBotApi, run_bot: RunBot, sessions: async_sessionmaker[AsyncSession]
) -> None:
    bot_api.fail_sends(1, 500)
    question = bot_api.message(PRIVATE, ANN, "How do I create an invoice?")
    async with run_bot():
        bot_api.push(question)
        (answer,) = await bot_api.wait_for_messages(1)

    first_try, second_try = bot_api.sent()
    assert first_try == second_try == answer
    assert "Sales → Invoices → New invoice" in answer["text"]
    assert bot_api.replies_to(question) == [answer]
    assert await states(sessions) == [("sent", 1)]


async def test_four_429s_in_a_row_are_waited_out(
    bot_api: FakeBotApi, run_bot: RunBot, sessions: async_sessionmaker[AsyncSession]
) -> None:
    bot_api.fail_sends(4, 429, retry_after=1)  # one more than the rate limiter retries
    async with run_bot():
        bot_api.push(bot_api.message(PRIVATE, ANN, "How do I create an invoice?"))
        (answer,) = await bot_api.wait_for_messages(1)

    assert bot_api.sent() == [answer] * 5
    assert await states(sessions) == [("sent", 1)]


async def test_an_answer_stored_but_not_sent_is_delivered_once_after_a_restart(
    bot_api: FakeBotApi, run_bot: RunBot, sessions: async_sessionmaker[AsyncSession]
) -> None:
    bot_api.fail_sends(1_000_000, 502)  # Telegram unreachable until the restart
    question = bot_api.message(PRIVATE, ANN, "How do I create an invoice?")
    async with run_bot():
        bot_api.push(question)
        await bot_api.wait_for_calls(1, "sendMessage")  # the answer is stored, sending fails
    assert await states(sessions) == [("pending", 0)]
    assert bot_api.delivered == []

    bot_api.heal()
    later = bot_api.message(PRIVATE, ANN, "How do I record a payment?")
    async with run_bot():  # a new process on the same database
        (answer,) = await bot_api.wait_for_messages(1)
        bot_api.push(later)
        await bot_api.wait_for_messages(2)
    async with run_bot():  # and another one: nothing is left to resend
        bot_api.push(bot_api.message(PRIVATE, ANN, "Thanks!"))
        await bot_api.wait_for_messages(3)

    assert bot_api.replies_to(question) == [answer]
    assert "Sales → Invoices → New invoice" in answer["text"]
    assert [len(bot_api.replies_to(m)) for m in (question, later)] == [1, 1]
    assert len(bot_api.delivered) == 3
    assert await states(sessions) == [("sent", 1)] * 3


async def test_a_refused_answer_is_failed_counted_and_apologized_for(
    bot_api: FakeBotApi, run_bot: RunBot, sessions: async_sessionmaker[AsyncSession]
) -> None:
    before = undelivered()
    bot_api.fail_sends(1, 400)  # Telegram refuses the message itself: no retry
    question = bot_api.message(PRIVATE, ANN, "How do I create an invoice?")
    async with run_bot():
        bot_api.push(question)
        (apology,) = await bot_api.wait_for_messages(1)

    assert apology["text"] == APOLOGY
    assert bot_api.replies_to(question) == [apology]
    assert len(bot_api.sent()) == 2
    assert await states(sessions) == [("failed", 0)]
    assert undelivered() == before + 1


async def test_when_the_patience_runs_out_the_answer_is_failed(
    bot_api: FakeBotApi,
    run_bot: RunBot,
    bot_settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    bot_settings.telegram.delivery_patience_seconds = 0.5  # shorter than the first backoff
    before = undelivered()
    bot_api.fail_sends(1, 503)
    async with run_bot():
        bot_api.push(bot_api.message(PRIVATE, ANN, "How do I create an invoice?"))
        (apology,) = await bot_api.wait_for_messages(1)

    assert apology["text"] == APOLOGY
    assert await states(sessions) == [("failed", 0)]
    assert undelivered() == before + 1
