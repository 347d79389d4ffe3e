"""The whole question reaches the model: an image sent as a file, the message a question
replies to (its author, text and photo), and, with group context `all`, what the chat said
meanwhile. Other files get a reply saying what the bot reads."""

import base64
from datetime import UTC, datetime, timedelta

from langchain_core.messages import BaseMessage
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.chat.service import ChatService
from app.db.models import TelegramChatMessage
from app.settings import Settings
from bot.handlers import UNREADABLE_FILE
from bot.question import CONTEXT_HEAD, Quote, whole_question
from tests.fakes import CapturingChatModel
from tests.telegram.conftest import RunBot
from tests.telegram.fake_bot_api import FakeBotApi, Json, chat, user

GROUP = chat(-1001)
ANN = user(11, "Ann", "Lee")
BOB = user(12, "Bob")
CARL = user(13, "Carl")
PNG = b"\x89PNG\r\n\x1a\nscreenshot"


def document(file_id: str, name: str, mime_type: str, data: bytes) -> Json:
    return {
        "file_id": file_id,
        "file_unique_id": f"u-{file_id}",
        "file_name": name,
        "mime_type": mime_type,
        "file_size": len(data),
    }


def parts(message: BaseMessage) -> tuple[str, list[dict[str, str]]]:
    """The text of a user message sent with images, and the images."""
    content = message.content
    assert isinstance(content, list)
    text, *images = content
    assert isinstance(text, dict)
    return text["text"], [i for i in images if isinstance(i, dict)]


async def user_messages(service: ChatService, key: str) -> list[str]:
    found = await service.history(key)
    assert found is not None
    return [m.content for m in found[1] if m.role == "user"]


async def test_a_screenshot_sent_as_a_file_is_read_like_a_photo(
    bot_api: FakeBotApi, run_bot: RunBot, bot_settings: Settings, model: CapturingChatModel
) -> None:
    bot_settings.llm.supports_images = True
    bot_api.files = {"doc-1": PNG}
    screenshot = bot_api.message(
        GROUP,
        ANN,
        document=document("doc-1", "Screenshot 2026-12-01.png", "image/png", PNG),
        caption="@SupportBot how do I create an invoice?",
    )
    async with run_bot():
        bot_api.push(screenshot)
        (reply,) = await bot_api.wait_for_messages(1)

    assert bot_api.sent("getFile") == [{"file_id": "doc-1"}]
    text, (image,) = parts(model.calls[0].messages[-1])
    assert text == "Ann Lee: how do I create an invoice? [image]"
    assert image["base64"] == base64.b64encode(PNG).decode()
    assert image["mime_type"] == "image/png"
    assert bot_api.replies_to(screenshot) == [reply]
    assert "Sales → Invoices → New invoice" in reply["text"]


async def test_another_file_gets_a_reply_saying_what_the_bot_reads(
    bot_api: FakeBotApi, run_bot: RunBot, bot_settings: Settings, model: CapturingChatModel
) -> None:
    bot_settings.llm.supports_images = True
    pdf = b"%PDF-1.7 invoice"
    bot_api.files = {"doc-2": pdf}
    private = chat(11)
    bare = bot_api.message(
        private, ANN, document=document("doc-2", "inv.pdf", "application/pdf", pdf)
    )
    with_question = bot_api.message(
        private,
        ANN,
        document=document("doc-2", "inv.pdf", "application/pdf", pdf),
        caption="How do I create an invoice?",
    )
    async with run_bot():
        bot_api.push(bare)
        bot_api.push(with_question)
        await bot_api.wait_for_messages(3)

    texts = [m["text"] for m in bot_api.delivered]
    assert texts[:2] == [UNREADABLE_FILE, UNREADABLE_FILE]
    assert "PNG, JPEG or WebP images sent as files" in UNREADABLE_FILE
    assert "Sales → Invoices → New invoice" in texts[2]
    assert bot_api.sent("getFile") == []
    assert len(model.calls) == 2  # one turn: the caption's question


async def test_a_question_replying_to_someone_else_brings_their_message_and_photo(
    bot_api: FakeBotApi,
    run_bot: RunBot,
    bot_settings: Settings,
    service: ChatService,
    model: CapturingChatModel,
) -> None:
    bot_settings.llm.supports_images = True
    bot_api.files = {"vat-shot": b"\xff\xd8the VAT screen"}
    anns = bot_api.message(
        GROUP, ANN, photo_ids=("vat-shot",), caption="My invoice shows the wrong VAT rate"
    )
    question = bot_api.message(
        GROUP, BOB, "@SupportBot where do I set the VAT rates?", reply_to=anns
    )
    async with run_bot():
        bot_api.push(anns)  # not addressed to the bot: no answer
        bot_api.push(question)
        (reply,) = await bot_api.wait_for_messages(1)

    text, (image,) = parts(model.calls[0].messages[-1])
    assert text == (
        'Bob: [In reply to Ann Lee, with an image: "My invoice shows the wrong VAT rate"]\n'
        "where do I set the VAT rates? [image]"
    )
    assert image["base64"] == base64.b64encode(b"\xff\xd8the VAT screen").decode()
    assert bot_api.replies_to(question) == [reply]
    assert (await user_messages(service, f"telegram:{GROUP['id']}")) == [
        '[In reply to Ann Lee, with an image: "My invoice shows the wrong VAT rate"]\n'
        "where do I set the VAT rates? [image]"
    ]


async def test_a_partial_quote_is_what_the_model_gets_and_a_reply_to_the_bot_is_no_quote(
    bot_api: FakeBotApi, run_bot: RunBot, model: CapturingChatModel
) -> None:
    anns = bot_api.message(GROUP, ANN, "Morning! The invoice for ACME is wrong. Lunch at 12?")
    quoting = bot_api.message(GROUP, BOB, "@SupportBot how do I fix it?", reply_to=anns) | {
        "quote": {"text": "The invoice for ACME is wrong.", "position": 9}
    }
    async with run_bot():
        bot_api.push(quoting)
        await bot_api.wait_for_messages(1)
        follow_up = bot_api.message(
            GROUP, BOB, "And how do I record a payment?", reply_to=bot_api.bot_messages[0]
        )
        bot_api.push(follow_up)
        await bot_api.wait_for_messages(2)

    first_turn = model.calls[0].messages[-1].content
    assert (
        first_turn
        == 'Bob: [In reply to Ann Lee: "The invoice for ACME is wrong."]\nhow do I fix it?'
    )
    assert model.calls[-1].messages[-3].content == "Bob: And how do I record a payment?"


async def test_with_group_context_all_the_chat_reaches_the_next_answered_turn(
    bot_api: FakeBotApi,
    run_bot: RunBot,
    bot_settings: Settings,
    service: ChatService,
    model: CapturingChatModel,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    bot_settings.telegram.group_context = "all"
    async with sessions() as session:  # said long ago, and never asked about
        session.add(
            TelegramChatMessage(
                conversation_key=f"telegram:{GROUP['id']}",
                author="Dan",
                text="Who took my stapler?",
                created_at=datetime.now(UTC) - timedelta(days=8),
            )
        )
        await session.commit()
    async with run_bot():
        bot_api.push(bot_api.message(GROUP, ANN, "Our VAT rate changed to 19% this year"))
        bot_api.push(bot_api.message(GROUP, CARL, "Same for us, since January"))
        bot_api.push(bot_api.message(GROUP, BOB, "@SupportBot where do I set the VAT rates?"))
        await bot_api.wait_for_messages(1)
        bot_api.push(bot_api.message(GROUP, BOB, "/ask How do I create an invoice?"))
        await bot_api.wait_for_messages(2)

    context = (
        "[Said in the chat before this message, not addressed to you:\n"
        "Ann Lee: Our VAT rate changed to 19% this year\n"
        "Carl: Same for us, since January]\n"
    )
    assert model.calls[0].messages[-1].content == f"Bob: {context}where do I set the VAT rates?"
    assert (await user_messages(service, f"telegram:{GROUP['id']}")) == [
        f"{context}where do I set the VAT rates?",
        "How do I create an invoice?",  # the context went in once
    ]
    assert len(bot_api.sent()) == 2  # the other messages got no answer
    async with sessions() as session:
        assert (await session.scalars(select(TelegramChatMessage))).all() == []


async def test_by_default_messages_not_addressed_to_the_bot_are_not_kept(
    bot_api: FakeBotApi, run_bot: RunBot, model: CapturingChatModel
) -> None:
    async with run_bot():
        bot_api.push(bot_api.message(GROUP, ANN, "Our VAT rate changed to 19% this year"))
        bot_api.push(bot_api.message(GROUP, BOB, "@SupportBot where do I set the VAT rates?"))
        await bot_api.wait_for_messages(1)

    assert model.calls[0].messages[-1].content == "Bob: where do I set the VAT rates?"


def test_the_extras_are_clipped_to_the_limit_and_the_question_never_is() -> None:
    question = "q" * 4096
    quote = Quote("Ann Lee", "a" * 4096, picture=None)
    context = [f"Carl: line {n}" for n in range(500)]

    text = whole_question(question, quote, context, limit=8192)
    assert len(text) == 8192
    assert text.endswith("\n" + question)
    assert text.startswith('[In reply to Ann Lee: "aaa') and "…]\n" in text
    assert CONTEXT_HEAD not in text  # the quote took the room

    roomy = whole_question("Where?", quote, context, limit=10_000)
    assert roomy.startswith(CONTEXT_HEAD) and roomy.endswith('a"]\nWhere?')
    assert "Carl: line 499]" in roomy and "Carl: line 0\n" not in roomy  # the latest kept
    assert len(roomy) <= 10_000
