"""Handoffs in the database. Each change of state is one conditional UPDATE, so two staff
members (or two replicas) racing for the same handoff cannot both win; the partial unique
index keeps one handoff not yet resolved per conversation."""

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from sqlalchemy import Integer, Select, bindparam, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.chat.outcome import BOT_ANSWERED
from app.db.models import Conversation, Feedback, Handoff, Turn

HandoffStatus = Literal["open", "claimed", "resolved"]
ACTIVE: tuple[HandoffStatus, ...] = ("open", "claimed")
# Turns the handoff took from the bot (app/chat/outcome.py).
NOT_BY_BOT = ("handed_off", "quiet", "bot_back")


class HandoffConflict(Exception):
    """The handoff is not in the state the change needs (claimed by someone else, resolved)."""

    def __init__(self, handoff: Handoff, message: str) -> None:
        super().__init__(message)
        self.handoff = handoff


_ACTIVE_FOR_KEY = (
    select(Handoff)
    .join(Conversation, Conversation.id == Handoff.conversation_id)
    .where(Conversation.key == bindparam("key"), Handoff.status.in_(ACTIVE))
)


async def active_for_key(session: AsyncSession, conversation_key: str) -> Handoff | None:
    # Built once: every turn of a handed-over audience asks (see app/db/queries.py).
    return await session.scalar(_ACTIVE_FOR_KEY, {"key": conversation_key})


async def insert_open(session: AsyncSession, handoff: Handoff) -> bool:
    """Add an open handoff; False (nothing added) when the conversation has one already."""
    try:
        async with session.begin_nested():
            session.add(handoff)
            await session.flush()
    except IntegrityError:
        return False
    return True


async def last_resolved_at(session: AsyncSession, conversation_id: int) -> datetime | None:
    """Triggers count what happened since the last handoff was resolved."""
    return await session.scalar(
        select(func.max(Handoff.resolved_at)).where(Handoff.conversation_id == conversation_id)
    )


def _outcomes_since_resolved() -> Select[str | None]:
    conversation = bindparam("conversation_id", type_=Integer)
    resolved = (
        select(func.max(Handoff.resolved_at))
        .where(Handoff.conversation_id == conversation)
        .scalar_subquery()
    )
    return (
        select(Turn.outcome)
        .where(
            Turn.conversation_id == conversation,
            Turn.outcome.in_(BOT_ANSWERED),
            or_(resolved.is_(None), Turn.finished_at > resolved),
        )
        .order_by(Turn.number.desc())
        .limit(bindparam("count"))
    )


_OUTCOMES_SINCE_RESOLVED = _outcomes_since_resolved()


async def outcomes_since_resolved(
    session: AsyncSession, conversation_id: int, count: int
) -> list[str]:
    """The outcomes of the conversation's last `count` turns the bot answered itself
    (newest first) since its last handoff was resolved, in one statement."""
    parameters = {"conversation_id": conversation_id, "count": count}
    return [str(o) for o in await session.scalars(_OUTCOMES_SINCE_RESOLVED, parameters)]


async def turns_with_outcome(
    session: AsyncSession, conversation_id: int, outcomes: tuple[str, ...]
) -> set[int]:
    query = select(Turn.number).where(
        Turn.conversation_id == conversation_id, Turn.outcome.in_(outcomes)
    )
    return set(await session.scalars(query))


async def thumbs_down(session: AsyncSession, conversation_id: int, since: datetime | None) -> int:
    query = select(func.count(Feedback.id)).where(
        Feedback.conversation_id == conversation_id, Feedback.rating == "down"
    )
    if since is not None:
        query = query.where(Feedback.created_at > since)
    return int(await session.scalar(query) or 0)


async def listed(session: AsyncSession, statuses: Sequence[str]) -> list[Handoff]:
    """Handoffs in these states, the oldest first (the queue's order)."""
    query = select(Handoff).where(Handoff.status.in_(statuses)).order_by(Handoff.id)
    return list(await session.scalars(query))


async def claim(session: AsyncSession, handoff_id: int, staff: str) -> Handoff | None:
    """Claim an open handoff for `staff` (the first claim wins; claiming one's own again
    is no change). None: no such handoff; HandoffConflict: claimed by another, or resolved."""
    result = await session.execute(
        update(Handoff)
        .where(Handoff.id == handoff_id, Handoff.status == "open")
        .values(status="claimed", claimed_by=staff, claimed_at=datetime.now(UTC))
        .execution_options(synchronize_session=False)
    )
    handoff = await _fresh(session, handoff_id)
    if handoff is None or getattr(result, "rowcount", 0) == 1:
        return handoff
    if handoff.status == "claimed" and handoff.claimed_by == staff:
        return handoff
    raise HandoffConflict(handoff, _why_not(handoff, "claimed"))


async def resolve(session: AsyncSession, handoff_id: int, staff: str) -> Handoff | None:
    """Close an open or claimed handoff; one claimed by someone else only they close."""
    found = await _fresh(session, handoff_id)
    if found is None:
        return None
    if found.status == "resolved" or (found.status == "claimed" and found.claimed_by != staff):
        raise HandoffConflict(found, _why_not(found, "resolved"))
    result = await session.execute(
        update(Handoff)
        .where(Handoff.id == handoff_id, Handoff.status == found.status)
        .values(status="resolved", resolved_by=staff, resolved_at=datetime.now(UTC))
        .execution_options(synchronize_session=False)
    )
    handoff = await _fresh(session, handoff_id)
    assert handoff is not None
    if getattr(result, "rowcount", 0) != 1:
        raise HandoffConflict(handoff, _why_not(handoff, "resolved"))
    return handoff


async def _fresh(session: AsyncSession, handoff_id: int) -> Handoff | None:
    return await session.get(Handoff, handoff_id, populate_existing=True)


def _why_not(handoff: Handoff, change: str) -> str:
    if handoff.status == "resolved":
        return f"handoff {handoff.id} is resolved already (by {handoff.resolved_by})"
    return f"handoff {handoff.id} is claimed by {handoff.claimed_by}: it cannot be {change}"
