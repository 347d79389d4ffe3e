"""The bot end to end: updates from the fake Bot API through python-telegram-bot's long
polling, the handlers and the ChatService, back as Bot API calls."""

import base64

from telegram.constants import MessageLimit

from app.chat.service import ChatService
from app.settings import Settings
from bot.handlers import (
    ADMINS_ONLY,
    APOLOGY,
    ASK_USAGE,
    FILE_NOT_DOWNLOADED,
    FILE_NOT_DOWNLOADED_NO_TEXT,
    NO_IMAGES,
    NO_IMAGES_NO_TEXT,
    RESET_DONE,
    RESET_NOT_CHECKED,
)
from tests.fakes import CapturingChatModel
from tests.telegram.conftest import STAFF_CHAT, RunBot
from tests.telegram.fake_bot_api import FakeBotApi, chat, user

GROUP = chat(-1001)
ANN = user(11, "Ann", "Lee")
BOB = user(12, "Bob")


async def test_in_a_group_the_bot_answers_only_when_addressed(
    bot_api: FakeBotApi, run_bot: RunBot, service: ChatService, model: CapturingChatModel
) -> None:
    async with run_bot():
        bot_api.push(bot_api.message(GROUP, ANN, "Morning all, the invoices are due today"))
        mention = bot_api.push(
            bot_api.message(GROUP, BOB, "@supportbot how do I create an invoice?")
        )["message"]
        first = (await bot_api.wait_for_messages(1))[0]
        bot_api.push(bot_api.message(GROUP, ANN, "@OtherBot how do I create an invoice?"))
        bot_answer = bot_api.bot_messages[0]
        follow_up = bot_api.push(
            bot_api.message(
                GROUP, ANN, "And how do I record a partial payment?", reply_to=bot_answer
            )
        )["message"]
        bot_api.push(bot_api.message(GROUP, BOB, "thanks!", reply_to=follow_up))
        edited = follow_up | {"text": "And how do I record a payment?", "edit_date": 1}
        bot_api.push(edited, kind="edited_message")
        ask = bot_api.push(bot_api.message(GROUP, BOB, "/ask Where do I set the VAT rates?"))[
            "message"
        ]
        await bot_api.wait_for_messages(3)

    sent = bot_api.sent()
    assert len(sent) == 3
    assert [len(bot_api.replies_to(m)) for m in (mention, follow_up, ask)] == [1, 1, 1]
    assert "Sales → Invoices → New invoice" in first["text"]
    assert "parse_mode" not in first and first["chat_id"] == GROUP["id"]
    assert {"chat_id": GROUP["id"], "action": "typing"} in bot_api.sent("sendChatAction")

    found = await service.history(f"telegram:{GROUP['id']}")
    assert found is not None
    conversation, messages = found
    assert conversation.audience == "client" and conversation.channel == "telegram"
    asked = [(m.author, m.content) for m in messages if m.role == "user"]
    assert asked == [
        ("Bob", "how do I create an invoice?"),
        ("Ann Lee", "And how do I record a partial payment?"),
        ("Bob", "Where do I set the VAT rates?"),
    ]
    assert model.calls[-1].messages[-3].content == "Bob: Where do I set the VAT rates?"


async def test_a_long_answer_is_split_and_a_flood_wait_is_retried(
    bot_api: FakeBotApi, run_bot: RunBot, model: CapturingChatModel
) -> None:
    model.answer_sentences = 60
    bot_api.fail_sends(1, 429, retry_after=1)
    question = bot_api.message(GROUP, ANN, "@SupportBot what is on the year-end closing checklist?")
    async with run_bot():
        bot_api.push(question)
        await bot_api.wait_for_messages(2)

    assert len(bot_api.sent()) == 2 + 1  # the refused first try is recorded as well
    parts = [m["text"] for m in bot_api.delivered]
    assert len(parts) == 2
    assert all(len(part) <= MessageLimit.MAX_TEXT_LENGTH for part in parts)
    assert parts[0].startswith("Step 1 of") and "Step 60 of" in parts[1]
    assert parts[1].endswith("Sources:\n• Year-end closing")
    assert bot_api.replies_to(question)[0]["text"] == parts[0]


async def test_text_goes_as_it_is_and_web_sources_are_links(
    bot_api: FakeBotApi, run_bot: RunBot
) -> None:
    async with run_bot():
        bot_api.push(bot_api.message(chat(11), ANN, "How do I filter the report rows by amount?"))
        (reply,) = await bot_api.wait_for_messages(1)

    assert reply["text"].startswith("Filter the report rows where amount < 100 & status")
    assert reply["text"].endswith("Sources:\n• Filters & reports")
    link = reply["entities"][-1]
    assert link["type"] == "text_link"
    assert link["url"] == "https://docs.example.com/filters?kind=report&lang=en"


async def test_an_update_redelivered_after_a_restart_is_not_answered_again(
    bot_api: FakeBotApi, run_bot: RunBot, service: ChatService
) -> None:
    question = bot_api.push(bot_api.message(chat(11), ANN, "How do I create an invoice?"))
    async with run_bot():
        await bot_api.wait_for_messages(1)
    bot_api.redeliver(question)  # the process died before Telegram saw the confirmation
    bot_api.push(bot_api.message(chat(11), ANN, "How do I record a payment?"))
    async with run_bot():  # a new process on the same database
        await bot_api.wait_for_messages(2)

    assert len(bot_api.sent()) == 2
    found = await service.history("telegram:11")
    assert found is not None
    assert [m.content for m in found[1] if m.role == "user"] == [
        "How do I create an invoice?",
        "How do I record a payment?",
    ]


async def test_a_photo_is_passed_to_a_model_that_reads_images(
    bot_api: FakeBotApi, run_bot: RunBot, bot_settings: Settings, model: CapturingChatModel
) -> None:
    bot_settings.llm.supports_images = True
    bot_api.files = {"small": b"thumbnail", "large": b"\xff\xd8full screenshot"}
    photo = bot_api.message(
        GROUP, ANN, photo_ids=("small", "large"), caption="@SupportBot how do I create an invoice?"
    )
    async with run_bot():
        bot_api.push(photo)
        (reply,) = await bot_api.wait_for_messages(1)

    assert bot_api.sent("getFile") == [{"file_id": "large"}]
    content = model.calls[0].messages[-1].content
    assert isinstance(content, list)
    text, image = content
    assert text == {"type": "text", "text": "Ann Lee: how do I create an invoice? [image]"}
    assert isinstance(image, dict)
    assert image["base64"] == base64.b64encode(b"\xff\xd8full screenshot").decode()
    assert image["mime_type"] == "image/jpeg"
    assert "Sales → Invoices → New invoice" in reply["text"]
    assert bot_api.replies_to(photo) == [reply]


async def test_without_image_support_the_bot_says_so_and_answers_the_caption(
    bot_api: FakeBotApi, run_bot: RunBot, model: CapturingChatModel
) -> None:
    bot_api.files = {"shot": b"screenshot"}
    private = chat(11)
    async with run_bot():
        bot_api.push(bot_api.message(private, ANN, photo_ids=("shot",)))
        bot_api.push(
            bot_api.message(
                private, ANN, photo_ids=("shot",), caption="How do I create an invoice?"
            )
        )
        await bot_api.wait_for_messages(3)

    texts = [m["text"] for m in bot_api.sent()]
    assert texts[:2] == [NO_IMAGES_NO_TEXT, NO_IMAGES]
    assert "Sales → Invoices → New invoice" in texts[2]
    assert bot_api.sent("getFile") == []
    assert len(model.calls) == 2  # one turn: the caption


async def test_a_file_telegram_refuses_to_hand_over_still_gets_its_caption_answered(
    bot_api: FakeBotApi, run_bot: RunBot, bot_settings: Settings, model: CapturingChatModel
) -> None:
    bot_settings.llm.supports_images = True
    bot_api.files = {"huge": b"a file over 20 MB, as Telegram sees it"}
    bot_api.fail("getFile", 2, status=400)  # "Bad Request: file is too big"
    private = chat(11)
    async with run_bot():
        bot_api.push(bot_api.message(private, ANN, photo_ids=("huge",)))
        bot_api.push(
            bot_api.message(
                private, ANN, photo_ids=("huge",), caption="How do I create an invoice?"
            )
        )
        await bot_api.wait_for_messages(3)

    texts = [m["text"] for m in bot_api.sent()]
    assert texts[:2] == [FILE_NOT_DOWNLOADED_NO_TEXT, FILE_NOT_DOWNLOADED]
    assert "Sales → Invoices → New invoice" in texts[2]
    assert len(bot_api.sent("getFile")) == 2
    assert len(model.calls) == 2  # one turn: the caption, without the image
    assert isinstance(model.calls[0].messages[-1].content, str)


async def test_a_staff_chat_gets_the_staff_profile(
    bot_api: FakeBotApi, run_bot: RunBot, service: ChatService
) -> None:
    async with run_bot():
        bot_api.push(bot_api.message(chat(STAFF_CHAT), BOB, "/ask How do I create an invoice?"))
        bot_api.push(bot_api.message(GROUP, BOB, "/ask How do I create an invoice?"))
        await bot_api.wait_for_messages(2)

    staff = await service.history(f"telegram:{STAFF_CHAT}")
    client = await service.history(f"telegram:{GROUP['id']}")
    assert staff is not None and client is not None
    assert (staff[0].audience, staff[0].profile) == ("staff", "staff")
    assert (client[0].audience, client[0].profile) == ("client", "client")


async def test_a_failed_turn_apologizes_and_keeps_the_message(
    bot_api: FakeBotApi, run_bot: RunBot, service: ChatService, model: CapturingChatModel
) -> None:
    model.fail_with = "the provider is down"
    question = bot_api.message(GROUP, ANN, "@SupportBot how do I create an invoice?")
    async with run_bot():
        bot_api.push(question)
        (reply,) = await bot_api.wait_for_messages(1)

    assert reply["text"] == APOLOGY
    assert bot_api.replies_to(question) == [reply]
    found = await service.history(f"telegram:{GROUP['id']}")
    assert found is not None
    assert [(m.role, m.content) for m in found[1]] == [("user", "how do I create an invoice?")]


async def test_only_chat_admins_reset_the_context(
    bot_api: FakeBotApi, run_bot: RunBot, service: ChatService, model: CapturingChatModel
) -> None:
    bot_api.chat_members[(GROUP["id"], ANN["id"])] = "creator"
    async with run_bot():
        bot_api.push(bot_api.message(GROUP, BOB, "/ask How do I create an invoice?"))
        bot_api.push(bot_api.message(GROUP, BOB, "/reset"))
        bot_api.push(bot_api.message(GROUP, ANN, "/reset@SupportBot"))
        bot_api.push(bot_api.message(GROUP, ANN, "/ask Where do I set the VAT rates?"))
        await bot_api.wait_for_messages(4)

    assert [m["text"] for m in bot_api.sent()[1:3]] == [ADMINS_ONLY, RESET_DONE]
    assert model.calls[-1].messages[1].content == "Ann Lee: Where do I set the VAT rates?"


async def test_reset_says_so_when_the_admin_check_itself_fails(
    bot_api: FakeBotApi, run_bot: RunBot, model: CapturingChatModel
) -> None:
    bot_api.chat_members[(GROUP["id"], ANN["id"])] = "creator"
    async with run_bot():
        bot_api.push(bot_api.message(GROUP, ANN, "/ask How do I create an invoice?"))
        await bot_api.wait_for_messages(1)
        bot_api.fail("getChatMember", 1, 502)
        bot_api.push(bot_api.message(GROUP, ANN, "/reset"))
        await bot_api.wait_for_messages(2)
        bot_api.push(bot_api.message(GROUP, ANN, "/ask Where do I set the VAT rates?"))
        await bot_api.wait_for_messages(3)

    assert bot_api.delivered[1]["text"] == RESET_NOT_CHECKED
    assert len(bot_api.sent("getChatMember")) == 1
    # nothing was reset: the model still sees the first question
    assert model.calls[-1].messages[1].content == "Ann Lee: How do I create an invoice?"


async def test_each_forum_topic_is_a_conversation_answered_in_its_topic(
    bot_api: FakeBotApi, run_bot: RunBot, service: ChatService
) -> None:
    forum = chat(-1003, forum=True)
    async with run_bot():
        for topic in (7, 9):
            bot_api.push(
                bot_api.message(forum, ANN, "/ask How do I create an invoice?", thread_id=topic)
            )
        await bot_api.wait_for_messages(2)

    assert [m["message_thread_id"] for m in bot_api.sent()] == [7, 9]
    assert {"chat_id": -1003, "action": "typing", "message_thread_id": 7} in bot_api.sent(
        "sendChatAction"
    )
    for topic in (7, 9):
        assert await service.history(f"telegram:-1003:{topic}") is not None


async def test_a_bare_mention_or_ask_gets_a_hint_and_no_turn(
    bot_api: FakeBotApi, run_bot: RunBot, model: CapturingChatModel
) -> None:
    async with run_bot():
        bot_api.push(bot_api.message(GROUP, ANN, "@SupportBot"))
        bot_api.push(bot_api.message(GROUP, ANN, "/ask"))
        await bot_api.wait_for_messages(2)

    assert [m["text"] for m in bot_api.sent()] == [ASK_USAGE, ASK_USAGE]
    assert model.calls == []


async def test_a_question_as_long_as_telegram_allows_is_answered(
    bot_api: FakeBotApi, run_bot: RunBot, service: ChatService
) -> None:
    question = "How do I create an invoice? " + "x" * (MessageLimit.MAX_TEXT_LENGTH - 28)
    assert len(question) == MessageLimit.MAX_TEXT_LENGTH
    async with run_bot():
        bot_api.push(bot_api.message(chat(11), ANN, question))
        (reply,) = await bot_api.wait_for_messages(1)

    assert "Sales → Invoices → New invoice" in reply["text"]
    found = await service.history("telegram:11")
    assert found is not None
    assert [m.content for m in found[1] if m.role == "user"] == [question]
