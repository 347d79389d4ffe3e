"""Small query functions over the models; callers own the session and the commit."""

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Conversation, Feedback, LLMCall, Message, Summary, Turn
from app.observability.usage import UsageTotals


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


async def find_turn(
    session: AsyncSession, conversation_key: str, number: int
) -> tuple[Conversation, Turn] | None:
    row = (
        await session.execute(
            select(Conversation, Turn)
            .join(Turn, Turn.conversation_id == Conversation.id)
            .where(Conversation.key == conversation_key, Turn.number == number)
        )
    ).first()
    return (row[0], row[1]) if row else None


async def start_turn(
    session: AsyncSession, conversation: Conversation, memory_scope: str | None = None
) -> Turn:
    last = await session.scalar(
        select(func.max(Turn.number)).where(Turn.conversation_id == conversation.id)
    )
    turn = Turn(conversation_id=conversation.id, number=(last or 0) + 1, memory_scope=memory_scope)
    session.add(turn)
    await session.flush()
    return turn


async def close_running_turns(
    session: AsyncSession, conversation: Conversation, status: str, error: str
) -> int:
    """End the conversation's `running` turns with `status`; how many there were."""
    result = await session.execute(
        update(Turn)
        .where(Turn.conversation_id == conversation.id, Turn.status == "running")
        .values(status=status, error=error, finished_at=datetime.now(UTC))
    )
    return int(getattr(result, "rowcount", 0) or 0)


async def turn_numbers(
    session: AsyncSession, conversation: Conversation, statuses: Collection[str]
) -> set[int]:
    """The numbers of the conversation's turns that ended with one of `statuses`."""
    result = await session.scalars(
        select(Turn.number).where(
            Turn.conversation_id == conversation.id, Turn.status.in_(statuses)
        )
    )
    return set(result)


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
    """Nothing said so far reaches the model again: every message is dropped and an empty
    summary replaces the current one (the old summaries stay, like the messages)."""
    await session.execute(
        update(Message)
        .where(Message.conversation_id == conversation.id)
        .values(context_state="dropped")
    )
    last_seq = await session.scalar(
        select(func.max(Message.seq)).where(Message.conversation_id == conversation.id)
    )
    session.add(
        Summary(
            conversation_id=conversation.id,
            text="",
            through_seq=last_seq or 0,
            model="reset",
            token_count=0,
        )
    )


async def archived_messages(session: AsyncSession, conversation_id: int) -> list[Message]:
    """What the model no longer sees in full: cleared tool results, dropped messages."""
    result = await session.scalars(
        select(Message)
        .where(Message.conversation_id == conversation_id, Message.context_state != "active")
        .order_by(Message.seq)
    )
    return list(result)


def _scope_archive(scope: str, conversation_id: int) -> Select[Message, str]:
    """The messages of `scope`'s turns in its other conversations that left their context
    there, with their conversation's key."""
    return (
        select(Message, Conversation.key)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .join(
            Turn,
            (Turn.conversation_id == Message.conversation_id) & (Turn.number == Message.turn),
        )
        .where(
            Turn.memory_scope == scope,
            Message.conversation_id != conversation_id,
            Message.context_state != "active",
        )
    )


async def scope_archive(
    session: AsyncSession, scope: str, conversation_id: int
) -> list[tuple[Message, str]]:
    found = await session.execute(_scope_archive(scope, conversation_id).order_by(Message.id))
    return [(row[0], row[1]) for row in found]


async def has_archive(
    session: AsyncSession, conversation: Conversation, scope: str | None = None
) -> bool:
    """Whether recall_history has anything to search: the conversation's own archive, or
    its person's (`scope`) in their other conversations."""
    found = await session.scalar(
        select(Message.id)
        .where(Message.conversation_id == conversation.id, Message.context_state != "active")
        .limit(1)
    )
    if found is None and scope is not None:
        found = await session.scalar(_scope_archive(scope, conversation.id).limit(1))
    return found is not None


async def clear_messages(session: AsyncSession, placeholders: dict[int, str]) -> None:
    """Show these tool results as their placeholders from now on."""
    for message_id, placeholder in placeholders.items():
        await session.execute(
            update(Message)
            .where(Message.id == message_id)
            .values(context_state="cleared", placeholder=placeholder)
        )


async def drop_messages(session: AsyncSession, message_ids: Sequence[int]) -> None:
    await session.execute(
        update(Message).where(Message.id.in_(message_ids)).values(context_state="dropped")
    )


async def latest_summary(session: AsyncSession, conversation: Conversation) -> Summary | None:
    return await session.scalar(
        select(Summary)
        .where(Summary.conversation_id == conversation.id)
        .order_by(Summary.id.desc())
        .limit(1)
    )


async def add_summary(
    session: AsyncSession,
    conversation: Conversation,
    text: str,
    through_message_id: int,
    model: str,
    token_count: int,
) -> Summary:
    through_seq = await session.scalar(select(Message.seq).where(Message.id == through_message_id))
    summary = Summary(
        conversation_id=conversation.id,
        text=text,
        through_seq=through_seq or 0,
        model=model,
        token_count=token_count,
    )
    session.add(summary)
    await session.flush()
    return summary


async def summary_count(session: AsyncSession, conversation: Conversation) -> int:
    """How many summaries the conversation has had (a reset's empty one included)."""
    count = await session.scalar(
        select(func.count(Summary.id)).where(Summary.conversation_id == conversation.id)
    )
    return count or 0


async def all_messages(session: AsyncSession, conversation: Conversation) -> list[Message]:
    result = await session.scalars(
        select(Message).where(Message.conversation_id == conversation.id).order_by(Message.seq)
    )
    return list(result)


@dataclass(frozen=True)
class ConversationSummary:
    key: str
    first_question: str
    last_activity: datetime


async def conversations_starting_with(
    session: AsyncSession, key_prefix: str, limit: int
) -> list[ConversationSummary]:
    """The conversations whose key starts with `key_prefix` (one staff member's widget
    chats), the most recently active first, each with its first question."""
    first_question = (
        select(Message.content)
        .where(Message.conversation_id == Conversation.id, Message.role == "user")
        .order_by(Message.seq)
        .limit(1)
        .correlate(Conversation)
        .scalar_subquery()
    )
    last_activity = (
        select(func.max(Message.created_at))
        .where(Message.conversation_id == Conversation.id)
        .correlate(Conversation)
        .scalar_subquery()
    )
    rows = await session.execute(
        select(Conversation.key, first_question, last_activity)
        .where(Conversation.key.startswith(key_prefix, autoescape=True))
        # SQLite's LIKE ignores case: "widget:ALICE:" is not alice's on PostgreSQL either.
        .where(func.substr(Conversation.key, 1, len(key_prefix)) == key_prefix)
        .where(first_question.is_not(None))
        .order_by(last_activity.desc(), Conversation.id.desc())
        .limit(limit)
    )
    return [ConversationSummary(key, question, activity) for key, question, activity in rows]


async def latest_feedback(session: AsyncSession, conversation: Conversation) -> dict[int, Feedback]:
    """Each rated turn's latest rating (a rating given again replaces the earlier one)."""
    rows = await session.scalars(
        select(Feedback).where(Feedback.conversation_id == conversation.id).order_by(Feedback.id)
    )
    return {feedback.turn: feedback for feedback in rows}


def _usage_by(group: Any) -> Select[Any]:
    """`group`, then the columns of a `UsageTotals` in order."""
    return select(
        group,
        func.count(LLMCall.id),
        func.coalesce(func.sum(LLMCall.input_tokens), 0),
        func.coalesce(func.sum(LLMCall.cached_tokens), 0),
        func.coalesce(func.sum(LLMCall.cache_write_tokens), 0),
        func.coalesce(func.sum(LLMCall.output_tokens), 0),
        func.coalesce(func.sum(LLMCall.cost_usd), 0.0),
    ).group_by(group)


async def usage_by_purpose(
    session: AsyncSession, conversation: Conversation
) -> dict[str, UsageTotals]:
    rows = await session.execute(
        _usage_by(LLMCall.purpose).where(LLMCall.conversation_id == conversation.id)
    )
    return {row[0]: UsageTotals(*row[1:]) for row in rows}


async def usage_by_profile(session: AsyncSession) -> dict[str, tuple[int, UsageTotals]]:
    """Per memory profile: the number of turns and their LLM usage."""
    turn_counts = await session.execute(
        select(Conversation.profile, func.count(Turn.id))
        .join(Turn, Turn.conversation_id == Conversation.id)
        .group_by(Conversation.profile)
    )
    turns = {profile: count for profile, count in turn_counts}
    rows = await session.execute(
        _usage_by(Conversation.profile).join(
            Conversation, Conversation.id == LLMCall.conversation_id
        )
    )
    return {row[0]: (turns.get(row[0], 0), UsageTotals(*row[1:])) for row in rows}


async def llm_calls(session: AsyncSession, conversation: Conversation) -> list[LLMCall]:
    result = await session.scalars(
        select(LLMCall).where(LLMCall.conversation_id == conversation.id).order_by(LLMCall.id)
    )
    return list(result)
