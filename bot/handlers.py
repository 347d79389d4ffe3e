"""The bot's handlers: an addressed message becomes one ChatService turn, its reply one or
more Telegram messages. One module: PTB registers them together, and they share the
chat's checks (addressed, allowed, group context) in order."""

import logging
from datetime import UTC, datetime, timedelta
from html import escape

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot, Chat, ChatMemberRestricted, Message, Update
from telegram.constants import ChatAction, ChatMemberStatus, ChatType
from telegram.error import BadRequest, TelegramError
from telegram.ext import Application, ApplicationHandlerStop, ContextTypes

from app.chat.service import ChatService
from app.chat.types import (
    IMAGE_MARKER,
    Citation,
    ImageInput,
    InvalidTurn,
    TurnDone,
    TurnError,
    TurnReply,
    TurnRequest,
    TurnStarted,
)
from app.memory import store as memory_store
from app.memory.scope import telegram_scope
from app.settings import Settings
from bot.dedupe import claim_update, forget_updates_before
from bot.delivery import Destination, Outbox
from bot.feedback import Rating, rated_answer, rating_keyboard
from bot.group_context import GroupContext
from bot.menu import register_commands
from bot.question import (
    CAN_READ,
    Picture,
    has_unreadable_file,
    picture_of,
    quote_of,
    whole_question,
)
from bot.render import Link, Part, reply_parts
from bot.updates import (
    audience,
    author_name,
    command_argument,
    conversation_key,
    group_person,
    question_text,
    replied_person,
)

log = logging.getLogger(__name__)

Context = ContextTypes.DEFAULT_TYPE

APOLOGY = "Sorry, I could not answer this time. Your message was kept; please try again later."
NOT_KEPT = "Sorry, I could not take your message this time. Please send it again."
NO_IMAGES = "I cannot read images yet, so I answered the text only."
NO_IMAGES_NO_TEXT = "I cannot read images yet. Please describe what the screenshot shows."
UNREADABLE_FILE = f"I cannot read this file. {CAN_READ}"
NOT_HANDED_OVER = "Telegram did not hand me the attached file, so I could not read it"
FILE_NOT_DOWNLOADED = f"{NOT_HANDED_OVER}; I answered the text only."
FILE_NOT_DOWNLOADED_NO_TEXT = f"{NOT_HANDED_OVER}. Please describe what it shows."
ASK_USAGE = "What is your question? For example: /ask How do I create an invoice?"
ADMINS_ONLY = "Only the chat's admins can start a fresh conversation."
RESET_DONE = "Starting fresh: I no longer see what was said before (it stays archived)."
NOTHING_TO_RESET = "There is nothing to reset yet."
FORGOTTEN = "Done: I have forgotten what you told me in this chat."
NOTHING_TO_FORGET = "I remember nothing you told me in this chat."
RESET_NOT_CHECKED = (
    "I could not check with Telegram whether you are an admin of this chat, so nothing was "
    "reset. Please try /reset again in a moment."
)
RATED = "Thanks for the feedback!"
RATING_STALE = "This answer can no longer be rated."
RATING_MEMBERS_ONLY = "Only members of the chat where this answer was given can rate it."
NOT_CHECKED = "I could not check that with Telegram just now. Please try again in a moment."
MEMBERS = {ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.MEMBER}
EMPTY_ANSWER = "I have no answer to this."
CLAIMS_KEPT = timedelta(days=7)


def answer_parts(answer: str, citations: list[Citation], link: Link) -> list[Part]:
    return reply_parts(answer, citations, link=link) or [Part(EMPTY_ANSWER)]


def help_text(bot_username: str) -> str:
    return (
        "I answer questions about the product from its documentation.\n\n"
        f"In a group, mention me (@{escape(bot_username)}), reply to one of my messages, or "
        "write /ask followed by your question. In a private chat, just write.\n"
        "You can send a screenshot (as a photo or a file) with your question as its caption, "
        "and reply to someone's message when you ask me about it.\n"
        "/reset (chat admins) starts a fresh conversation.\n"
        'I remember what you tell me in this chat ("remember that …" too) for your next '
        "conversations here; /forget makes me forget it."
    )


async def show_typing(message: Message) -> None:
    """ "typing…" once per turn: each action counts against a group's message budget."""
    try:
        await message.reply_chat_action(ChatAction.TYPING)
    except TelegramError as error:  # cosmetic: never fail the turn for it
        log.debug("typing action failed: %s", error)


async def _downloaded(pictures: list[Picture]) -> list[ImageInput]:
    """The pictures Telegram hands over: one it refuses (getFile fails, e.g. a file over
    20 MB whose size the message did not say) is left out, not the whole message."""
    images = []
    for picture in pictures:
        try:
            images.append(await picture.download())
        except TelegramError as error:
            log.warning("could not download an attached file: %s", error)
    return images


class SupportBot:
    """Callbacks over one ChatService; the database sessions serve update de-duplication."""

    def __init__(
        self, settings: Settings, chat: ChatService, sessions: async_sessionmaker[AsyncSession]
    ) -> None:
        self._settings = settings
        self._chat = chat
        self._sessions = sessions
        self.outbox = Outbox(
            sessions,
            settings.telegram.delivery_patience_seconds,
            count_failures=settings.observability.metrics_enabled,
        )
        self.group_context = GroupContext(sessions)

    async def start_up(self, application: Application) -> None:
        """Once the bot runs: drop old update claims and group context, then, in the
        background, register the command menu and resend what earlier runs answered (or
        failed to answer) but did not deliver."""
        week_ago = datetime.now(UTC) - CLAIMS_KEPT
        async with self._sessions() as session:
            await forget_updates_before(session, week_ago)
        await self.group_context.forget_before(week_ago)
        application.create_task(register_commands(application.bot))
        application.create_task(self.resend_undelivered(application.bot))

    async def resend_undelivered(self, bot: Bot) -> None:
        for delivery, turn in await self.outbox.undelivered():
            if self.outbox.stopping.is_set():
                return
            answered = turn.status == "ok"
            if answered:
                parts = answer_parts(
                    *await self.outbox.stored_answer(turn), self._settings.knowledge.public_url
                )
            else:  # failed or interrupted: the question is kept, the user is told
                parts = [Part(APOLOGY)]
            log.info("resending the answer of turn %s", turn.id)
            await self.outbox.deliver(
                bot,
                delivery.turn_id,
                Destination.of_row(delivery),
                parts,
                already_sent=delivery.parts_sent,
                reply_markup=rating_keyboard(turn.id) if answered else None,
                apology=APOLOGY if answered else None,
            )

    async def skip_duplicates(self, update: Update, context: Context) -> None:
        async with self._sessions() as session:
            if not await claim_update(session, context.bot.id, update.update_id):
                log.info("update %s was handled already", update.update_id)
                raise ApplicationHandlerStop

    async def answer(self, update: Update, _: Context) -> None:
        message = update.effective_message
        assert message is not None  # the handler's filters admit messages only
        await self._answer(message, question_text(message))

    async def ask(self, update: Update, _: Context) -> None:
        message = update.effective_message
        assert message is not None
        await self._answer(message, command_argument(message), ask=True)

    async def keep_as_context(self, update: Update, _: Context) -> None:
        """A group message not addressed to the bot (group context `all`)."""
        message = update.effective_message
        assert message is not None
        text = (message.text or message.caption or "").strip()
        if picture_of(message) is not None:
            text += IMAGE_MARKER
        if text:
            await self.group_context.keep(conversation_key(message), author_name(message), text)

    async def help(self, update: Update, context: Context) -> None:
        message = update.effective_message
        assert message is not None
        await message.reply_text(help_text(context.bot.username))

    async def reset(self, update: Update, _: Context) -> None:
        message = update.effective_message
        assert message is not None
        try:
            from_admin = await self._from_admin(message)
        except TelegramError as error:  # getChatMember failed or timed out
            log.warning("could not check whether /reset came from an admin: %s", error)
            await message.reply_text(RESET_NOT_CHECKED)
            return
        if not from_admin:
            await message.reply_text(ADMINS_ONLY)
            return
        key = conversation_key(message)
        reset = await self._chat.reset_context(key)
        await self.group_context.taken(key)
        await message.reply_text(RESET_DONE if reset else NOTHING_TO_RESET)

    async def forget(self, update: Update, _: Context) -> None:
        """The sender's own memory in this chat goes (app/memory), and their words with it
        from the archive recall_history searches."""
        message = update.effective_message
        assert message is not None
        if message.from_user is None:
            return
        async with self._sessions() as session:
            forgotten = await memory_store.forget(
                session, telegram_scope(message.chat.id, message.from_user.id)
            )
            await session.commit()
        await message.reply_text(FORGOTTEN if forgotten else NOTHING_TO_FORGET)

    async def on_error(self, update: object, context: Context) -> None:
        update_id = update.update_id if isinstance(update, Update) else None
        log.error("handling update %s failed", update_id, exc_info=context.error)

    async def _answer(self, message: Message, text: str, *, ask: bool = False) -> None:
        picture, quote = picture_of(message), quote_of(message)
        if has_unreadable_file(message):
            await message.reply_text(UNREADABLE_FILE)
            if not text:
                return
        elif picture is not None and not self._settings.llm.supports_images:
            await message.reply_text(NO_IMAGES if text else NO_IMAGES_NO_TEXT)
            if not text:
                return
            picture = None
        if not text and picture is None:  # a bare mention or /ask
            await message.reply_text(ASK_USAGE)
            return
        images: list[ImageInput] = []
        if self._settings.llm.supports_images:
            shown = [p for p in (picture, quote.picture if quote else None) if p is not None]
            images = await _downloaded(shown)
            if len(images) < len(shown):
                await message.reply_text(
                    FILE_NOT_DOWNLOADED if text else FILE_NOT_DOWNLOADED_NO_TEXT
                )
                if not text and not images:
                    return
        key = conversation_key(message)
        context, last_context = await self.group_context.pending(key)
        request = TurnRequest(
            channel="telegram",
            conversation_key=key,
            audience=audience(message, self._settings.telegram),
            author=author_name(message),
            text=whole_question(text, quote, context, self._settings.chat.max_message_chars),
            images=tuple(images),
            ask=ask,  # answered even while a person has the chat
            memory_scope=telegram_scope(
                message.chat.id, message.from_user.id if message.from_user else None
            ),
            person=group_person(message),  # in a group, a handoff is one member's
            replying_to=replied_person(message),
        )
        destination = Destination.of(message)
        await show_typing(message)
        try:
            outcome, turn_id = await self._run_turn(request, destination)
        except InvalidTurn as refused:
            await message.reply_text(escape(f"I cannot take this message: {refused}."))
            return
        if turn_id is None:  # nothing was stored, so nothing is owed either
            await message.reply_text(NOT_KEPT)
            return
        if last_context is not None:  # the context is in the stored turn now
            await self.group_context.taken(key, last_context)
        if isinstance(outcome, TurnError):
            await self.outbox.deliver(message.get_bot(), turn_id, destination, [Part(APOLOGY)])
            return
        await self.outbox.deliver(
            message.get_bot(),
            turn_id,
            destination,
            answer_parts(outcome.text, outcome.citations, self._settings.knowledge.public_url),
            reply_markup=rating_keyboard(turn_id),
            apology=APOLOGY,
        )

    async def rate(self, update: Update, _: Context) -> None:
        """A click on 👍/👎: stored once the clicker is found in the answer's chat; the
        buttons then mark the choice."""
        query = update.callback_query
        assert query is not None  # the handler admits callback queries only
        rating = Rating.parse(query.data)
        rated = await rated_answer(self._sessions, rating.turn_id) if rating else None
        if rating is None or rated is None or query.message is None:
            await query.answer(RATING_STALE)
            return
        chat = query.message.chat
        try:
            member = chat.id == rated.chat_id and await self._is_member(chat, query.from_user.id)
        except TelegramError as error:
            log.warning("could not check a rater's membership: %s", error)
            await query.answer(NOT_CHECKED)
            return
        if not member:
            await query.answer(RATING_MEMBERS_ONLY)
            return
        await self._chat.add_feedback(
            rated.conversation, rated.turn, rating.helpful, None, query.from_user.full_name
        )
        await query.answer(RATED)
        try:
            await query.get_bot().edit_message_reply_markup(
                chat.id,
                query.message.message_id,
                reply_markup=rating_keyboard(rating.turn_id, rating.helpful),
            )
        except BadRequest as error:  # the same choice again, or the message is gone
            log.debug("rating buttons left as they were: %s", error)

    async def _run_turn(
        self, request: TurnRequest, destination: Destination
    ) -> tuple[TurnReply | TurnError, int | None]:
        """The turn's outcome and its delivery's id, recorded as soon as the question is
        stored (None when it was not)."""
        turn_id = None
        async for event in self._chat.stream_turn(request, tokens=False):  # no tokens shown
            if isinstance(event, TurnStarted):
                turn_id = await self.outbox.expect(event.conversation_key, event.turn, destination)
            elif isinstance(event, TurnDone):
                return event.reply, turn_id
            elif isinstance(event, TurnError):
                return event, turn_id
        raise AssertionError("a turn's events end with done or error")

    @staticmethod
    async def _is_member(chat: Chat, user_id: int) -> bool:
        """In groups, whether the user is in the chat now (public groups can be read, and
        their buttons clicked, from outside)."""
        if chat.type == ChatType.PRIVATE:
            return True
        member = await chat.get_member(user_id)
        if isinstance(member, ChatMemberRestricted):
            return member.is_member
        return member.status in MEMBERS

    async def _from_admin(self, message: Message) -> bool:
        if message.chat.type == ChatType.PRIVATE:
            return True
        if message.sender_chat is not None:  # an anonymous admin writes as the group itself
            return message.sender_chat.id == message.chat_id
        if message.from_user is None:
            return False
        member = await message.chat.get_member(message.from_user.id)
        return member.status in {ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.OWNER}
