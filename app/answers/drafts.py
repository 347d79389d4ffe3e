"""A team answer drafted from a conversation: a staff reply as the answer, the customer's
question before it as the question. One rule for every place that offers it (the queue's
"Save as answer", Telegram's `/save`)."""

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Message


@dataclass(frozen=True)
class Draft:
    question: str
    answer: str


def question_before(messages: Sequence[Message], reply: Message) -> str:
    """The customer's last question before `reply`: a message the bot searched the
    documentation for, or one held for the staff member (no answer of the bot's); not a
    request for a person (the bot handed over without a search). Else their last message;
    "" when they said nothing before it."""
    before = [m for m in messages if m.seq < reply.seq]
    theirs = [m for m in before if m.role == "user"]

    def asked(question: Message) -> bool:
        roles = {m.role for m in before if m.turn == question.turn}
        return "tool" in roles or "assistant" not in roles

    chosen = [m for m in theirs if asked(m)] or theirs
    return chosen[-1].content if chosen else ""


async def conversation_messages(session: AsyncSession, conversation_id: int) -> list[Message]:
    return list(
        await session.scalars(
            select(Message).where(Message.conversation_id == conversation_id).order_by(Message.seq)
        )
    )


async def from_staff_reply(session: AsyncSession, message_id: int) -> Draft | None:
    """The draft of staff message `message_id`; None when there is no such staff message."""
    reply = await session.get(Message, message_id)
    if reply is None or reply.role != "staff":
        return None
    messages = await conversation_messages(session, reply.conversation_id)
    return Draft(question_before(messages, reply), reply.content)
