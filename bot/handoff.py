"""Handoffs in Telegram: staff replies and notices sent to the client's chat, the card
posted to the staff chat with a Claim button, and the bot staying quiet where a person
has taken over (messages are stored for the staff member, not answered; `/ask` still gets
the bot). In a group that is one member's thread, their messages and replies to them:
the bot answers the others, and staff replies reply to the member's last message."""

import logging
import re
from functools import partial

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import (
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    ReplyParameters,
    Update,
)
from telegram.error import TelegramError
from telegram.ext import ApplicationHandlerStop, ContextTypes
from telegramify_markdown import utf16_len

from app.chat.service import ChatService
from app.chat.types import TurnReply, TurnRequest
from app.db import queries
from app.db.models import TelegramDelivery
from app.handoff.card import HandoffCard
from app.handoff.draft import Draft
from app.handoff.service import HandoffService, Undelivered
from app.handoff.store import HandoffConflict, holding, people_of
from app.observability import metrics
from app.settings import Settings
from bot.dedupe import claim_update
from bot.delivery import Destination, Outbox, send_patiently
from bot.render import Entity, Part, split_parts
from bot.staff import ADMINS, staff_name
from bot.updates import (
    audience,
    author_name,
    conversation_key,
    group_person,
    question_text,
    replied_person,
)

log = logging.getLogger(__name__)

Context = ContextTypes.DEFAULT_TYPE
CLAIM_DATA = re.compile(r"^handoff:claim:(\d{1,10})$")
CLAIM_PATTERN = CLAIM_DATA.pattern
STAFF_SUFFIX = " (support team)"
# How long a staff reply or a card is resent (bot/delivery.py's policy). Short: a staff
# member waits on the reply's request, and the answer that opened a handoff waits on its
# card; longer than one request timeout (5 s), so that a timed-out send is tried again.
PATIENCE_SECONDS = 10.0


def client_parts(author: str | None, text: str) -> list[Part]:
    """A staff reply (under "Alice (support team):" in bold) or a notice as Telegram
    messages, split as answers are."""
    entities: list[Entity] = []
    if author:
        heading = f"{author}{STAFF_SUFFIX}:"
        entities.append(Entity("bold", 0, utf16_len(heading)))
        text = f"{heading}\n{text}"
    return split_parts(text, entities)


def chat_of(key: str) -> tuple[int, int | None] | None:
    """The chat (and forum topic) of a `telegram:<chat>[:<topic>]` conversation."""
    match = re.fullmatch(r"telegram:(-?\d+)(?::(\d+))?", key)
    if match is None:
        return None
    return int(match[1]), int(match[2]) if match[2] else None


class TelegramMessenger:
    """app.handoff.service.Messenger over the Bot API."""

    def __init__(
        self, bot: Bot, settings: Settings, sessions: async_sessionmaker[AsyncSession]
    ) -> None:
        self._bot = bot
        self._staff_chat = settings.handoff.staff_telegram_chat_id
        self._count_failures = settings.observability.metrics_enabled
        self._sessions = sessions

    async def to_client(
        self, conversation_key: str, author: str | None, text: str, in_reply_to: int | None
    ) -> bool:
        chat = chat_of(conversation_key)
        if chat is None:
            return False
        reply_to = (
            None if in_reply_to is None else await self._message_of(conversation_key, in_reply_to)
        )
        await self._send_parts(
            chat[0], client_parts(author, text), thread=chat[1], reply_to=reply_to
        )
        return True

    async def _message_of(self, conversation_key: str, turn: int) -> int | None:
        """The Telegram message of the turn's question, as its delivery recorded it."""
        async with self._sessions() as session:
            found = await queries.find_turn(session, conversation_key, turn)
            if found is None:
                return None
            delivery = await session.get(TelegramDelivery, found[1].id)
        return delivery.reply_to_message_id if delivery else None

    async def card_opened(self, handoff_id: int, card: HandoffCard, draft: Draft) -> None:
        if self._staff_chat is None:
            return
        # A card the summary model made long is split as answers are; the Claim button
        # goes under its last part, where the reading ends. The draft, shortened, comes
        # last: staff edit and send it from the queue page.
        claim = InlineKeyboardButton("Claim", callback_data=f"handoff:claim:{handoff_id}")
        try:
            await self._send_parts(
                self._staff_chat,
                split_parts(f"{card.as_text()}\n{draft.as_text()}", []),
                under_last=InlineKeyboardMarkup([[claim]]),
            )
        except Undelivered as error:  # the handoff stands: staff see it in the web queue
            log.error("the card of handoff %s was not posted to staff: %s", handoff_id, error)
            if self._count_failures:
                metrics.count_undelivered()

    async def _send_parts(
        self,
        chat_id: int,
        parts: list[Part],
        *,
        thread: int | None = None,
        reply_to: int | None = None,
        under_last: InlineKeyboardMarkup | None = None,
    ) -> None:
        """The parts in order (the first replying to message `reply_to`, if any), each
        resent with patience (bot/delivery.py's policy)."""
        replying = ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to else None
        for arrived, part in enumerate(parts):
            send = partial(
                self._bot.send_message,
                chat_id,
                part.text,
                entities=part.entities or None,
                parse_mode=None,
                message_thread_id=thread,
                reply_parameters=replying if arrived == 0 else None,
                reply_markup=under_last if arrived == len(parts) - 1 else None,
            )
            try:
                await send_patiently(send, PATIENCE_SECONDS)
            except TelegramError as error:
                so_far = f" ({arrived} of its {len(parts)} parts arrived)" if arrived else ""
                raise Undelivered(f"Telegram did not take the message{so_far}: {error}") from error


class HandoffHandlers:
    """The bot's handoff callbacks (registered in bot/application.py)."""

    def __init__(
        self,
        settings: Settings,
        chat: ChatService,
        handoffs: HandoffService,
        sessions: async_sessionmaker[AsyncSession],
        outbox: Outbox,
    ) -> None:
        self._settings = settings
        self._chat = chat
        self._handoffs = handoffs
        self._sessions = sessions
        self._outbox = outbox

    async def hold_for_staff(self, update: Update, context: Context) -> None:
        """Before the usual handlers: a message a person's handoff holds (in a group the
        member's own and replies to them, in a private chat every one) is stored for the
        staff member and not answered (this handler de-duplicates the update itself)."""
        message = update.effective_message
        if message is None:
            return
        key = conversation_key(message)
        request = TurnRequest(
            "telegram",
            key,
            audience(message, self._settings.telegram),
            author_name(message),
            question_text(message) or "[image]",
            person=group_person(message),
            replying_to=replied_person(message),
        )
        async with self._sessions() as session:
            if await holding(session, key, people_of(request)) is None:
                return  # the usual handlers (and their de-duplication) take it
            first_time = await claim_update(session, context.bot.id, update.update_id)
        if first_time:
            await self._hold(message, request)
        raise ApplicationHandlerStop

    async def _hold(self, message: Message, request: TurnRequest) -> None:
        """The turn (quiet, or the bot given back); its message recorded as the turn's
        delivery, which staff replies reply to, and what the turn says sent."""
        outcome = await self._chat.turn_outcome(request)
        if outcome.turn is None:  # nothing was stored
            return
        destination = Destination.of(message)
        turn_id = await self._outbox.expect(request.conversation_key, outcome.turn, destination)
        said = outcome.text if isinstance(outcome, TurnReply) else ""
        await self._outbox.deliver(
            message.get_bot(), turn_id, destination, client_parts(None, said)
        )

    async def claim(self, update: Update, _: Context) -> None:
        """The Claim button under a card in the staff chat."""
        query = update.callback_query
        assert query is not None and query.data is not None  # the handler's pattern
        match = CLAIM_DATA.match(query.data)
        assert match is not None
        message = query.message
        if message is None or message.chat.id != self._settings.handoff.staff_telegram_chat_id:
            await query.answer("Handoffs are claimed in the staff chat.")
            return
        staff = await self._claimant(query.from_user.id, query.get_bot())
        if staff is None:
            await query.answer("Only staff members claim handoffs.", show_alert=True)
            return
        try:
            handoff = await self._handoffs.claim(int(match[1]), staff)
        except HandoffConflict as lost:
            await query.answer(str(lost), show_alert=True)
            return
        if handoff is None:
            await query.answer("This handoff no longer exists.")
            return
        await query.answer(f"Handoff {handoff.id} is yours: reply from the staff widget.")
        try:
            await query.edit_message_reply_markup(None)
        except TelegramError as error:  # cosmetic: the claim stands
            log.debug("could not remove the Claim button: %s", error)

    async def _claimant(self, user_id: int, bot: Bot) -> str | None:
        """Who claims for this Telegram user: a listed staff member, or an administrator of
        the staff chat (as `telegram:<user id>`); else nobody."""
        try:
            return await staff_name(self._settings.handoff, bot, user_id, ADMINS)
        except TelegramError as error:
            log.warning("could not ask Telegram whether user %s is staff: %s", user_id, error)
            return None
