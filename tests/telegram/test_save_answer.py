"""`/save` in Telegram: the real bot (long polling against the fake Bot API) over the real
runtime (the offline model, the sample knowledge base copied for the test, handoffs). A
handed-over member of a group asks, a staff member replies (as from the queue), and
replying `/save` to that reply in the group saves it as a team answer, which then answers
another customer's reworded question in a chat of their own. Only staff save, and only
from a reply to a staff reply or a customer's question."""

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.answers.service import AnswerService
from app.handoff.service import HandoffService
from app.runtime import Runtime
from app.settings import Settings, TelegramSettings
from bot.save_answer import NO_ANSWER, NOT_STAFF, UNRELATED, USAGE
from tests.telegram.conftest import polling_bot
from tests.telegram.fake_bot_api import TOKEN, FakeBotApi, chat, serve, user

GROUP = chat(-1001)
STAFF_CHAT = chat(-2002)
ANN = user(11, "Ann")  # a customer, handed over to a person
BOB = user(12, "Bob")  # another customer in the group, in no staff chat
ALICE = user(21, "Alice")  # staff, listed as "alice"
CAROL = user(22, "Carol")  # a member of the staff chat, listed nowhere
DAN = user(31, "Dan")  # a customer writing to the bot in private
QUESTION = "Can I pay my subscription with PayPal?"
REPLY = "Yes: open Settings → Billing → Payment method, choose PayPal and sign in to PayPal."
REWORDED = "Is PayPal accepted for the subscription?"
PAGES = "https://support.example.com"

Json = dict[str, Any]


@pytest.fixture
async def bot_api() -> AsyncIterator[FakeBotApi]:
    async with serve(FakeBotApi()) as api:
        api.chat_members[(STAFF_CHAT["id"], BOB["id"])] = "left"
        yield api


@pytest.fixture
async def runtime(
    settings: Settings, bot_api: FakeBotApi, sample_index: Path, tmp_path: Path
) -> AsyncIterator[Runtime]:
    from app.db import migrate

    settings.knowledge.qdrant_path = tmp_path / "own-qdrant"  # answers are written into it
    shutil.copytree(sample_index, settings.knowledge.qdrant_path)
    settings.telegram = TelegramSettings(
        token=TOKEN, api_base_url=f"{bot_api.url}/bot", file_base_url=f"{bot_api.url}/file/bot"
    )
    settings.handoff.staff_telegram_chat_id = STAFF_CHAT["id"]
    settings.handoff.staff_telegram_users = {ALICE["id"]: "alice"}
    settings.handoff.transcript_base_url = PAGES
    migrate.upgrade(settings.db.url)
    runtime = Runtime.from_settings(settings)
    await runtime.start()
    yield runtime
    await runtime.aclose()


def in_chat(bot_api: FakeBotApi, chat_: Json) -> list[str]:
    return [m["text"] for m in bot_api.delivered if m["chat_id"] == chat_["id"]]


async def said(bot_api: FakeBotApi, message: Json) -> str:
    """What the bot replied to `message`, once it has."""
    for _ in range(500):
        if replies := bot_api.replies_to(message):
            return str(replies[-1]["text"])
        await asyncio.sleep(0.02)
    raise AssertionError(f"no reply to {message.get('text')!r}")


async def arrived(bot_api: FakeBotApi, chat_: Json, count: int) -> list[str]:
    """The bot's messages in `chat_`, once there are `count`."""
    for _ in range(500):
        if len(texts := in_chat(bot_api, chat_)) >= count:
            return texts
        await asyncio.sleep(0.02)
    raise AssertionError(f"fewer than {count} messages in {chat_['id']}: {in_chat(bot_api, chat_)}")


async def held(runtime: Runtime, text: str) -> None:
    """Wait until the group's conversation holds a user message saying `text`."""
    for _ in range(500):
        found = await runtime.chat.history(f"telegram:{GROUP['id']}")
        if found and any(m.role == "user" and m.content == text for m in found[1]):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{text!r} was not stored")


async def test_a_staff_reply_saved_with_save_answers_the_next_customer(
    bot_api: FakeBotApi, runtime: Runtime
) -> None:
    settings = runtime.settings
    answers = AnswerService.configured(runtime.sessions, runtime.knowledge, settings.knowledge)
    handoffs = runtime.chat.handoffs
    assert isinstance(handoffs, HandoffService)
    async with polling_bot(settings, runtime.chat, runtime.sessions, answers):
        bot_api.push(bot_api.message(GROUP, ANN, "@SupportBot can I talk to a human?"))
        await arrived(bot_api, STAFF_CHAT, 1)  # the card
        question = bot_api.message(GROUP, ANN, f"@SupportBot {QUESTION}")
        bot_api.push(question)
        await held(runtime, QUESTION)
        (handoff,) = await handoffs.queue()
        await handoffs.claim(handoff.id, "alice")
        await handoffs.reply(handoff.id, "alice", REPLY)
        (reply,) = [m for m in bot_api.bot_messages if m["text"].startswith("alice (support")]
        assert bot_api.replies_to(question)[-1]["text"] == f"alice (support team):\n{REPLY}"

        # Not staff, not a reply, a reply to something else, a question without an answer.
        refused = {
            NOT_STAFF: bot_api.message(GROUP, BOB, "/save", reply_to=reply),
            USAGE: bot_api.message(GROUP, ALICE, "/save"),
            UNRELATED: bot_api.message(
                GROUP, ALICE, "/save Lunch at noon", reply_to=bot_api.message(GROUP, BOB, "lunch?")
            ),
            NO_ANSWER: bot_api.message(GROUP, ALICE, "/save", reply_to=question),
        }
        for line, attempt in refused.items():
            bot_api.push(attempt)
            assert await said(bot_api, attempt) == line
        assert await answers.listed() == []

        saving = bot_api.message(GROUP, ALICE, "/save", reply_to=reply)
        bot_api.push(saving)
        confirmed = (await arrived(bot_api, STAFF_CHAT, 2))[-1]
        assert confirmed == (
            f"Saved as a team answer #1: {QUESTION}\n"
            f"Edit or disable it on the answers page: {PAGES}/widget/static/answers.html"
        )
        assert not bot_api.replies_to(saving)  # the customers' chat sees no confirmation
        (saved,) = await answers.listed()
        assert (saved.question, saved.answer, saved.author) == (QUESTION, REPLY, "alice")

        private = chat(DAN["id"])
        asking = bot_api.message(private, DAN, REWORDED)
        bot_api.push(asking)
        answer = await said(bot_api, asking)
    assert "Settings → Billing → Payment method" in answer, answer
    assert answer.endswith(f"Sources:\n• Support team answer ({saved.updated_at.date()})")


async def test_save_with_an_answer_replying_to_a_customer_question(
    bot_api: FakeBotApi, runtime: Runtime
) -> None:
    settings = runtime.settings
    answers = AnswerService.configured(runtime.sessions, runtime.knowledge, settings.knowledge)
    async with polling_bot(settings, runtime.chat, runtime.sessions, answers):
        question = bot_api.message(GROUP, BOB, "@SupportBot how do I export my data to Excel?")
        bot_api.push(question)
        await said(bot_api, question)  # the bot's own answer
        bot_api.push(
            bot_api.message(GROUP, BOB, "/save Anything I like", reply_to=question)
        )  # a customer who is in no staff chat
        saving = bot_api.message(
            GROUP, CAROL, "/save@SupportBot Open Reports → Export, then pick Excel.",
            reply_to=question,
        )  # fmt: skip
        bot_api.push(saving)
        confirmed = (await arrived(bot_api, STAFF_CHAT, 1))[-1]
    assert confirmed.startswith("Saved as a team answer #1: how do I export my data to Excel?")
    (saved,) = await answers.listed()
    assert saved.question == "how do I export my data to Excel?"
    assert saved.answer == "Open Reports → Export, then pick Excel."
    assert saved.author == f"telegram:{CAROL['id']}"
    assert not [t for t in in_chat(bot_api, GROUP) if t.startswith("Saved as")]
