"""`/save` in Telegram: a staff member saves a team answer (app/answers) from a chat where
the bot answers customers. Replying `/save` to a support team reply the bot delivered
saves that reply as the answer and the customer's question before it as the question (the
rule of the queue's "Save as answer": app/answers/drafts.py); `/save <text>` replying to
a customer's question the bot answered or held for staff saves <text> as its answer. The
confirmation goes to the staff chat, so the customers' chat sees none."""

import logging
import re
from html import escape

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Message, Update
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from app.answers.service import AnswerDraft, AnswerService
from app.db.models import Answer, Conversation, TelegramDelivery
from app.db.models import Message as StoredMessage
from app.settings import Settings
from bot.handoff import STAFF_SUFFIX
from bot.staff import MEMBERS, staff_name
from bot.updates import command_argument, conversation_key, question_text

log = logging.getLogger(__name__)

ANSWERS_PAGE = "/widget/static/answers.html"
USAGE = (
    "Reply /save to a support team reply the bot delivered, or /save <answer> to a "
    "customer's question, to save it as a team answer."
)
NOT_STAFF = "Only staff members (of the staff chat) can save answers."
NOT_CHECKED = "I could not check with Telegram that you are staff, so nothing was saved."
UNRELATED = (
    "That message is neither a support team reply nor a customer's question the bot "
    "answered or held, so nothing was saved."
)
NO_ANSWER = "Write the answer after the command, replying to the question: /save <answer>"
NO_QUESTION = "No question of the customer's comes before that reply, so nothing was saved."
HEADING = re.compile(rf"^(.+){re.escape(STAFF_SUFFIX)}:\n")  # bot/handoff.py's client_parts


def _words(text: str) -> str:
    return " ".join(text.split())


class SaveAnswer:
    """The `/save` command (registered in bot/application.py)."""

    def __init__(
        self,
        settings: Settings,
        sessions: async_sessionmaker[AsyncSession],
        answers: AnswerService,
    ) -> None:
        self._settings = settings
        self._sessions = sessions
        self._answers = answers

    async def save(self, update: Update, _: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None:
            return
        user = message.from_user
        try:  # an anonymous admin writes as a chat: no one to check
            staff = (
                await staff_name(self._settings.handoff, message.get_bot(), user.id, MEMBERS)
                if user is not None and message.sender_chat is None
                else None
            )
        except TelegramError as error:
            log.warning("could not ask Telegram whether a /save is staff's: %s", error)
            await message.reply_text(NOT_CHECKED)
            return
        if staff is None:
            await message.reply_text(NOT_STAFF)
            return
        replied = message.reply_to_message
        if replied is None or replied.forum_topic_created is not None:
            await message.reply_text(USAGE)
            return
        draft = await self._draft(replied, command_argument(message))
        if isinstance(draft, str):  # why it cannot be saved
            await message.reply_text(draft)
            return
        question, answer = draft
        saved = await self._answers.create(AnswerDraft(question, answer, author=staff))
        log.info("%s saved team answer %s from %s", staff, saved.id, conversation_key(message))
        await self._confirm(message, saved)

    async def _draft(self, replied: Message, text: str) -> tuple[str, str] | str:
        """The question and answer `/save <text>` replying to `replied` means, or the line
        saying why it means none."""
        if replied.from_user is not None and replied.from_user.id == replied.get_bot().id:
            reply_id = await self._staff_reply(replied)
            drafted = await self._answers.drafted(reply_id) if reply_id is not None else None
            if drafted is None:
                return UNRELATED
            if not drafted.question.strip():
                return NO_QUESTION
            return drafted.question, text or drafted.answer
        if not await self._stored_question(replied):
            return UNRELATED
        question = question_text(replied)
        if not question:
            return NO_QUESTION
        return (question, text) if text else NO_ANSWER

    async def _staff_reply(self, sent: Message) -> int | None:
        """The stored staff message a message of the bot's delivered (a long one in parts),
        found by its text in the chat's conversation, the latest first."""
        said = sent.text or ""
        heading = HEADING.match(said)
        wanted = _words(said[heading.end() :] if heading else said)
        if not wanted:
            return None
        async with self._sessions() as session:
            rows = await session.execute(
                select(StoredMessage.id, StoredMessage.author, StoredMessage.content)
                .join(Conversation, Conversation.id == StoredMessage.conversation_id)
                .where(Conversation.key == conversation_key(sent), StoredMessage.role == "staff")
                .order_by(StoredMessage.seq.desc())
            )
            for message_id, author, content in rows:
                if (heading is None or author == heading[1]) and wanted in _words(content):
                    return int(message_id)
        return None

    async def _stored_question(self, message: Message) -> bool:
        """Whether the bot stored this message as a turn's question (answered or held)."""
        async with self._sessions() as session:
            found = await session.scalar(
                select(TelegramDelivery.turn_id).where(
                    TelegramDelivery.chat_id == message.chat_id,
                    TelegramDelivery.reply_to_message_id == message.message_id,
                )
            )
        return found is not None

    async def _confirm(self, message: Message, saved: Answer) -> None:
        """In the staff chat (or, with none configured, where /save was said)."""
        base = self._settings.handoff.transcript_base_url.rstrip("/")
        where = (
            f"Edit or disable it on the answers page: {base}{ANSWERS_PAGE}"
            if base
            else "Edit or disable it on the staff answers page; `supportbot answers list` lists it."
        )
        text = escape(f"Saved as a team answer #{saved.id}: {saved.question}\n{where}")
        staff_chat = self._settings.handoff.staff_telegram_chat_id
        try:
            if staff_chat is None or staff_chat == message.chat_id:
                await message.reply_text(text)
            else:
                await message.get_bot().send_message(staff_chat, text)
        except TelegramError as error:  # the answer is saved: only the note is missing
            log.warning("the confirmation of team answer %s was not sent: %s", saved.id, error)
