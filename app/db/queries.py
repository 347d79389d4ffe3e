"""Small query functions over the models; callers own the session and the commit."""

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Conversation, LLMCall, Message, Turn


async def get_conversation(session: AsyncSession, key: str) -> Conversation | None:
    return await session.scalar(select(Conversation).where(Conversation.key == key))


async def get_or_create_conversation(
    session: AsyncSession, key: str, *, channel: str, audience: str, profile: str
) -> Conversation:
    conversation = await get_conversation(session, key)
    if conversation is None:
        conversation = Conversation(key=key, channel=channel, audience=audience, profile=profile)
        session.add(conversation)
        await session.flush()
    return conversation


async def start_turn(session: AsyncSession, conversation: Conversation) -> Turn:
    last = await session.scalar(
        select(func.max(Turn.number)).where(Turn.conversation_id == conversation.id)
    )
    turn = Turn(conversation_id=conversation.id, number=(last or 0) + 1)
    session.add(turn)
    await session.flush()
    return turn


async def append_messages(
    session: AsyncSession, conversation: Conversation, turn: int, rows: Sequence[dict[str, Any]]
) -> list[Message]:
    last = await session.scalar(
        select(func.max(Message.seq)).where(Message.conversation_id == conversation.id)
    )
    messages = [
        Message(conversation_id=conversation.id, turn=turn, seq=(last or 0) + offset, **row)
        for offset, row in enumerate(rows, start=1)
    ]
    session.add_all(messages)
    await session.flush()
    return messages


async def context_messages(session: AsyncSession, conversation: Conversation) -> list[Message]:
    """What the model may still see, in order (dropped messages stay in the archive)."""
    result = await session.scalars(
        select(Message)
        .where(Message.conversation_id == conversation.id, Message.context_state != "dropped")
        .order_by(Message.seq)
    )
    return list(result)


async def drop_from_context(session: AsyncSession, conversation: Conversation) -> None:
    await session.execute(
        update(Message)
        .where(Message.conversation_id == conversation.id)
        .values(context_state="dropped")
    )


async def all_messages(session: AsyncSession, conversation: Conversation) -> list[Message]:
    result = await session.scalars(
        select(Message).where(Message.conversation_id == conversation.id).order_by(Message.seq)
    )
    return list(result)


async def llm_calls(session: AsyncSession, conversation: Conversation) -> list[LLMCall]:
    result = await session.scalars(
        select(LLMCall).where(LLMCall.conversation_id == conversation.id).order_by(LLMCall.id)
    )
    return list(result)
