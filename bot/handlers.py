"""The bot's handlers: an addressed message becomes one ChatService turn, its reply one or
more Telegram messages."""

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from datetime import UTC, datetime, timedelta
from html import escape

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Message, Update
from telegram.constants import ChatAction, ChatMemberStatus, ChatType
from telegram.error import TelegramError
from telegram.ext import Application, ApplicationHandlerStop, ContextTypes

from app.chat.service import ChatService
from app.chat.types import ImageInput, InvalidTurn, TurnError, TurnRequest
from app.settings import Settings
from bot.dedupe import claim_update, forget_updates_before
from bot.render import reply_messages
from bot.updates import audience, author_name, command_argument, conversation_key, question_text

log = logging.getLogger(__name__)

Context = ContextTypes.DEFAULT_TYPE

APOLOGY = "Sorry, I could not answer this time. Your message was kept; please try again later."
NOT_KEPT = "Sorry, I could not take your message this time. Please send it again."
NO_IMAGES = "I cannot read images yet, so I answered the text only."
NO_IMAGES_NO_TEXT = "I cannot read images yet. Please describe what the screenshot shows."
ASK_USAGE = "What is your question? For example: /ask How do I create an invoice?"
ADMINS_ONLY = "Only the chat's admins can start a fresh conversation."
RESET_DONE = "Starting fresh: I no longer see what was said before (it stays archived)."
NOTHING_TO_RESET = "There is nothing to reset yet."
EMPTY_ANSWER = "I have no answer to this."
TYPING_REFRESH_SECONDS = 4.5  # Telegram shows "typing…" for 5 seconds
CLAIMS_KEPT = timedelta(days=7)


def help_text(bot_username: str) -> str:
    return (
        "I answer questions about the product from its documentation.\n\n"
        f"In a group, mention me (@{escape(bot_username)}), reply to one of my messages, or "
        "write /ask followed by your question. In a private chat, just write.\n"
        "You can send a screenshot with your question as its caption.\n"
        "/reset (chat admins) starts a fresh conversation."
    )


@asynccontextmanager
async def typing(message: Message) -> AsyncIterator[None]:
    """Show "typing…" in the chat (and topic) for as long as the block runs."""

    async def keep_typing() -> None:
        while True:
            try:
                await message.reply_chat_action(ChatAction.TYPING)
            except TelegramError as error:  # cosmetic: never fail the turn for it
                log.debug("typing action failed: %s", error)
            await asyncio.sleep(TYPING_REFRESH_SECONDS)

    task = asyncio.create_task(keep_typing())
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


async def largest_photo(message: Message) -> ImageInput:
    size = max(message.photo, key=lambda photo: photo.width * photo.height)
    data = await (await size.get_file()).download_as_bytearray()
    return ImageInput(bytes(data), "image/jpeg")  # Telegram re-encodes photos as JPEG


class SupportBot:
    """Callbacks over one ChatService; the database sessions serve update de-duplication."""

    def __init__(
        self, settings: Settings, chat: ChatService, sessions: async_sessionmaker[AsyncSession]
    ) -> None:
        self._settings = settings
        self._chat = chat
        self._sessions = sessions

    async def forget_old_claims(self, _: Application) -> None:
        async with self._sessions() as session:
            await forget_updates_before(session, datetime.now(UTC) - CLAIMS_KEPT)

    async def skip_duplicates(self, update: Update, _: Context) -> None:
        async with self._sessions() as session:
            if not await claim_update(session, update.update_id):
                log.info("update %s was handled already", update.update_id)
                raise ApplicationHandlerStop

    async def answer(self, update: Update, _: Context) -> None:
        message = update.effective_message
        assert message is not None  # the handler's filters admit messages only
        await self._answer(message, question_text(message))

    async def ask(self, update: Update, _: Context) -> None:
        message = update.effective_message
        assert message is not None
        await self._answer(message, command_argument(message))

    async def help(self, update: Update, context: Context) -> None:
        message = update.effective_message
        assert message is not None
        await message.reply_text(help_text(context.bot.username))

    async def reset(self, update: Update, _: Context) -> None:
        message = update.effective_message
        assert message is not None
        if not await self._from_admin(message):
            await message.reply_text(ADMINS_ONLY)
            return
        reset = await self._chat.reset_context(conversation_key(message))
        await message.reply_text(RESET_DONE if reset else NOTHING_TO_RESET)

    async def on_error(self, update: object, context: Context) -> None:
        update_id = update.update_id if isinstance(update, Update) else None
        log.error("handling update %s failed", update_id, exc_info=context.error)

    async def _answer(self, message: Message, text: str) -> None:
        if not text and not message.photo:  # a bare mention or /ask
            await message.reply_text(ASK_USAGE)
            return
        images: tuple[ImageInput, ...] = ()
        if message.photo and self._settings.llm.supports_images:
            images = (await largest_photo(message),)
        elif message.photo:
            await message.reply_text(NO_IMAGES if text else NO_IMAGES_NO_TEXT)
            if not text:
                return
        request = TurnRequest(
            channel="telegram",
            conversation_key=conversation_key(message),
            audience=audience(message, self._settings.telegram),
            author=author_name(message),
            text=text,
            images=images,
        )
        try:
            async with typing(message):
                outcome = await self._chat.turn_outcome(request)  # Telegram shows no tokens
        except InvalidTurn as refused:
            await message.reply_text(escape(f"I cannot take this message: {refused}."))
            return
        if isinstance(outcome, TurnError):
            await message.reply_text(APOLOGY if outcome.message_kept else NOT_KEPT)
            return
        parts = reply_messages(outcome.text, outcome.citations) or [EMPTY_ANSWER]
        await message.reply_text(parts[0], do_quote=True)
        for part in parts[1:]:
            await message.reply_text(part, do_quote=False)

    async def _from_admin(self, message: Message) -> bool:
        if message.chat.type == ChatType.PRIVATE:
            return True
        if message.sender_chat is not None:  # an anonymous admin writes as the group itself
            return message.sender_chat.id == message.chat_id
        if message.from_user is None:
            return False
        member = await message.chat.get_member(message.from_user.id)
        return member.status in {ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.OWNER}
