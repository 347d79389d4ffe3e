"""👍/👎 under each answer: a click is a callback query carrying the turn's id and the
rating; it is stored like the widget's feedback (a Langfuse `user_feedback` score too)."""

import re
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from app.db.models import Conversation, TelegramDelivery, Turn

HELPFUL, UNHELPFUL = "👍", "👎"
CHOSEN = " ✓"
_DATA = re.compile(r"rate:(?P<turn_id>\d{1,18}):(?P<rating>up|down)")


def rating_keyboard(turn_id: int, chosen: bool | None = None) -> InlineKeyboardMarkup:
    """The two buttons; `chosen` (helpful or not) marks the last click."""
    buttons = [
        InlineKeyboardButton(
            label + (CHOSEN if chosen is helpful else ""),
            callback_data=f"rate:{turn_id}:{'up' if helpful else 'down'}",
        )
        for label, helpful in ((HELPFUL, True), (UNHELPFUL, False))
    ]
    return InlineKeyboardMarkup([buttons])


@dataclass(frozen=True)
class Rating:
    turn_id: int
    helpful: bool

    @classmethod
    def parse(cls, data: str | None) -> "Rating | None":
        """None for anything but one of our buttons' data."""
        match = _DATA.fullmatch(data or "")
        if match is None:
            return None
        return cls(int(match["turn_id"]), match["rating"] == "up")


@dataclass(frozen=True)
class RatedAnswer:
    chat_id: int  # where the answer was delivered
    conversation: Conversation
    turn: Turn


async def rated_answer(
    sessions: async_sessionmaker[AsyncSession], turn_id: int
) -> RatedAnswer | None:
    """The answered turn behind a button; None when there is none (any more)."""
    async with sessions() as session:
        row = (
            await session.execute(
                select(TelegramDelivery.chat_id, Conversation, Turn)
                .join(Turn, Turn.id == TelegramDelivery.turn_id)
                .join(Conversation, Conversation.id == Turn.conversation_id)
                .where(TelegramDelivery.turn_id == turn_id, Turn.status == "ok")
            )
        ).first()
    return None if row is None else RatedAnswer(*row)
