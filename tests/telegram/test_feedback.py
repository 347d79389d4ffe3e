"""👍/👎 under each answer: a click by a member of the answer's chat is stored as feedback,
answered, and marked on the buttons; anything else gets a polite answer and stores nothing."""

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import Feedback
from bot.handlers import APOLOGY, RATED, RATING_MEMBERS_ONLY, RATING_STALE
from tests.fakes import CapturingChatModel
from tests.telegram.conftest import RunBot
from tests.telegram.fake_bot_api import FakeBotApi, Json, chat, user

GROUP = chat(-1001)
OTHER_GROUP = chat(-1009)
ANN = user(11, "Ann", "Lee")
BOB = user(12, "Bob")
EVE = user(66, "Eve")


def labels(message: Json) -> list[str]:
    return [b["text"] for row in message["reply_markup"]["inline_keyboard"] for b in row]


async def ratings(sessions: async_sessionmaker[AsyncSession]) -> list[tuple[int, str, str | None]]:
    async with sessions() as session:
        rows = await session.scalars(select(Feedback).order_by(Feedback.id))
        return [(f.turn, f.rating, f.author) for f in rows]


async def test_members_rate_an_answer_and_the_buttons_mark_the_choice(
    bot_api: FakeBotApi, run_bot: RunBot, sessions: async_sessionmaker[AsyncSession]
) -> None:
    async with run_bot():
        bot_api.push(bot_api.message(GROUP, ANN, "@SupportBot how do I create an invoice?"))
        (sent,) = await bot_api.wait_for_messages(1)
        answer = bot_api.bot_messages[0]
        assert labels(answer) == ["👍", "👎"]

        thumbs_up = bot_api.click(ANN, answer, "👍")
        assert (await bot_api.wait_for_answered_callback(thumbs_up))["text"] == RATED
        await bot_api.wait_for_calls(1, "editMessageReplyMarkup")
        assert labels(answer) == ["👍 ✓", "👎"]

        thumbs_down = bot_api.click(BOB, answer, "👎")
        assert (await bot_api.wait_for_answered_callback(thumbs_down))["text"] == RATED
        await bot_api.wait_for_calls(2, "editMessageReplyMarkup")
        assert labels(answer) == ["👍", "👎 ✓"]

    assert "Sales → Invoices → New invoice" in sent["text"]
    assert await ratings(sessions) == [(1, "up", "Ann Lee"), (1, "down", "Bob")]


async def test_outsiders_forged_and_stale_clicks_are_answered_politely(
    bot_api: FakeBotApi, run_bot: RunBot, sessions: async_sessionmaker[AsyncSession]
) -> None:
    bot_api.chat_members[(GROUP["id"], EVE["id"])] = "left"
    async with run_bot():
        bot_api.push(bot_api.message(GROUP, ANN, "@SupportBot how do I create an invoice?"))
        await bot_api.wait_for_messages(1)
        answer = bot_api.bot_messages[0]
        data = answer["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        # the other group's message carries this answer's button data
        elsewhere = {**answer, "chat": OTHER_GROUP}
        clicks = [
            (bot_api.click(EVE, answer, "👍"), RATING_MEMBERS_ONLY),  # left the group
            (bot_api.callback_query(ANN, elsewhere, data), RATING_MEMBERS_ONLY),
            (bot_api.callback_query(ANN, answer, "rate:999999:up"), RATING_STALE),
            (bot_api.callback_query(ANN, answer, "something else"), RATING_STALE),
        ]
        for query, _ in clicks[1:]:
            bot_api.push(query, kind="callback_query")
        answered = [(await bot_api.wait_for_answered_callback(q))["text"] for q, _ in clicks]

    assert answered == [expected for _, expected in clicks]
    assert await ratings(sessions) == []
    assert bot_api.sent("editMessageReplyMarkup") == []
    assert labels(answer) == ["👍", "👎"]


async def test_an_apology_has_no_buttons_and_a_long_answer_has_them_under_its_last_part(
    bot_api: FakeBotApi, run_bot: RunBot, model: CapturingChatModel
) -> None:
    private = chat(11)
    model.fail_with = "the provider is down"
    async with run_bot():
        bot_api.push(bot_api.message(private, ANN, "How do I create an invoice?"))
        await bot_api.wait_for_messages(1)
        model.fail_with = None
        model.answer_sentences = 60
        bot_api.push(bot_api.message(private, ANN, "What is on the year-end closing checklist?"))
        await bot_api.wait_for_messages(3)

    apology, first, last = bot_api.delivered
    assert apology["text"] == APOLOGY and "reply_markup" not in apology
    assert "reply_markup" not in first
    assert labels(last) == ["👍", "👎"]
