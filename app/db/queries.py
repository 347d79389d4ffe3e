"""Small query functions over the models; callers own the session and the commit. One
module: every statement over the models in one place, each written once.

The statements every turn runs are built once, with bound parameters (`bindparam`):
building an expression and computing its cache key cost more than running it on SQLite;
a built statement keeps its key."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, bindparam, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import (
    Conversation,
    ConversationToken,
    Feedback,
    LLMCall,
    Message,
    Summary,
    Turn,
)
from app.observability.usage import UsageTotals


async def get_conversation(session: AsyncSession, key: str) -> Conversation | None:
    return await session.scalar(select(Conversation).where(Conversation.key == key))


async def conversation_token(session: AsyncSession, key: str) -> str | None:
    """The SHA-256 of the token the caller who started conversation `key` got; None when
    nobody started it with one."""
    return await session.scalar(
        select(ConversationToken.token_sha256).where(ConversationToken.conversation_key == key)
    )


async def claim_conversation(session: AsyncSession, key: str, token_sha256: str) -> bool:
    """Record who starts conversation `key`; False when it exists already. Two callers
    claiming it at once: the second flush raises IntegrityError (the key is unique)."""
    if await get_conversation(session, key) is not None:
        return False
    session.add(ConversationToken(conversation_key=key, token_sha256=token_sha256))
    await session.flush()
    return True


@dataclass(frozen=True)
class TurnStart:
    """A conversation as its next turn finds it: the last message's `seq` and the last
    turn's number and status (0 and None before the first)."""

    conversation: Conversation
    last_seq: int
    last_turn: int
    last_status: str | None


def _turn_start() -> Select[Any]:
    last_seq = (
        select(func.max(Message.seq)).where(Message.conversation_id == Conversation.id)
    ).scalar_subquery()
    last_turn = (
        select(Turn.number, Turn.status)
        .where(Turn.conversation_id == Conversation.id)
        .order_by(Turn.number.desc())
        .limit(1)
    )
    return select(
        Conversation,
        last_seq,
        last_turn.with_only_columns(Turn.number).scalar_subquery(),
        last_turn.with_only_columns(Turn.status).scalar_subquery(),
    ).where(Conversation.key == bindparam("key"))


_TURN_START = _turn_start()


async def turn_start(
    session: AsyncSession, key: str, *, channel: str, audience: str, profile: str
) -> TurnStart:
    """The conversation (created when new) with its last `seq` and last turn, in one
    statement: read under the conversation's lock, they stay true for the whole turn."""
    row = (await session.execute(_TURN_START, {"key": key})).first()
    if row is not None:
        return TurnStart(row[0], row[1] or 0, row[2] or 0, row[3])
    conversation = Conversation(key=key, channel=channel, audience=audience, profile=profile)
    session.add(conversation)
    await session.flush()
    return TurnStart(conversation, 0, 0, None)


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


async def turn_author(session: AsyncSession, conversation: Conversation, number: int) -> str | None:
    """Who asked turn `number`: the author of its first message from the chat."""
    return await session.scalar(
        select(Message.author)
        .where(
            Message.conversation_id == conversation.id,
            Message.turn == number,
            Message.role == "user",
        )
        .order_by(Message.seq)
        .limit(1)
    )


async def start_turn(
    session: AsyncSession,
    conversation: Conversation,
    number: int,
    memory_scope: str | None,
    person: str | None,
) -> Turn:
    turn = Turn(
        conversation_id=conversation.id, number=number, memory_scope=memory_scope, person=person
    )
    session.add(turn)
    await session.flush()
    return turn


async def close_turn(
    session: AsyncSession, conversation: Conversation, number: int, status: str, error: str
) -> None:
    """End one turn of the conversation, found `running`, with `status`."""
    await session.execute(
        update(Turn)
        .where(Turn.conversation_id == conversation.id, Turn.number == number)
        .values(status=status, error=error, finished_at=datetime.now(UTC))
    )


async def last_seq(session: AsyncSession, conversation: Conversation) -> int:
    found = await session.scalar(
        select(func.max(Message.seq)).where(Message.conversation_id == conversation.id)
    )
    return found or 0


_INSERT_MESSAGES = insert(Message)


async def append_messages(
    session: AsyncSession,
    conversation: Conversation,
    turn: int,
    rows: Sequence[dict[str, Any]],
    after_seq: int,
) -> None:
    """Insert messages numbered on from `after_seq`, the conversation's last (read under
    its lock): one statement when the rows name the same columns (a None is inserted as
    NULL, not left out)."""
    if rows:
        await session.execute(
            _INSERT_MESSAGES,
            [
                {"conversation_id": conversation.id, "turn": turn, "seq": after_seq + n, **row}
                for n, row in enumerate(rows, start=1)
            ],
            execution_options={"render_nulls": True},
        )


async def add_message(
    session: AsyncSession, conversation: Conversation, turn: int, row: dict[str, Any]
) -> Message:
    """One message after the conversation's last, as a stored object (its id and time)."""
    seq = await last_seq(session, conversation) + 1
    message = Message(conversation_id=conversation.id, turn=turn, seq=seq, **row)
    session.add(message)
    await session.flush()
    return message


async def context_messages(session: AsyncSession, conversation: Conversation) -> list[Message]:
    """What the model may still see, in order (dropped messages stay in the archive)."""
    return [message for message, _ in await context_with_turns(session, conversation)]


_CONTEXT_WITH_TURNS = (
    select(Message, Turn.status)
    .outerjoin(
        Turn,
        (Turn.conversation_id == Message.conversation_id) & (Turn.number == Message.turn),
    )
    .where(
        Message.conversation_id == bindparam("conversation_id"),
        Message.context_state != "dropped",
    )
    .order_by(Message.seq)
)


async def context_with_turns(
    session: AsyncSession, conversation: Conversation
) -> list[tuple[Message, str | None]]:
    """What the model may still see, in order (dropped messages stay in the archive), each
    with the status of the turn it was filed under."""
    result = await session.execute(_CONTEXT_WITH_TURNS, {"conversation_id": conversation.id})
    return [(message, status) for message, status in result]


async def drop_from_context(session: AsyncSession, conversation: Conversation) -> None:
    """Nothing said so far reaches the model again: every message is dropped and an empty
    summary replaces the current one (the old summaries stay, like the messages)."""
    await session.execute(
        update(Message)
        .where(Message.conversation_id == conversation.id)
        .values(context_state="dropped")
    )
    session.add(
        Summary(
            conversation_id=conversation.id,
            text="",
            through_seq=await last_seq(session, conversation),
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


async def has_scope_archive(session: AsyncSession, scope: str, conversation_id: int) -> bool:
    """Whether the person (`scope`) has anything for recall_history in their other
    conversations."""
    found = await session.scalar(_scope_archive(scope, conversation_id).limit(1))
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
    return (await summaries(session, conversation))[0]


_SUMMARIES = (
    select(Summary, func.count().over())
    .where(Summary.conversation_id == bindparam("conversation_id"))
    .order_by(Summary.id.desc())
    .limit(1)
)


async def summaries(
    session: AsyncSession, conversation: Conversation
) -> tuple[Summary | None, int]:
    """The conversation's latest summary and how many it has had (a reset's empty one
    included), in one statement."""
    found = await session.execute(_SUMMARIES, {"conversation_id": conversation.id})
    row = found.first()
    return (row[0], row[1]) if row else (None, 0)


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


async def memory_blocks(session: AsyncSession, conversation: Conversation) -> dict[int, str]:
    """The memory block each turn that had one sent the model, by turn number."""
    rows = await session.execute(
        select(Turn.number, Turn.memory_block).where(
            Turn.conversation_id == conversation.id, Turn.memory_block.is_not(None)
        )
    )
    return {number: block for number, block in rows if block is not None}


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
