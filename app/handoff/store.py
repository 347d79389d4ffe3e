"""Handoffs in the database. Each change of state is one conditional UPDATE, so two staff
members (or two replicas) racing for the same handoff cannot both win; the partial unique
index keeps one handoff not yet resolved per person of a conversation.

In a chat several people share (a Telegram group) a handoff is one member's: it holds
their messages and replies to them, and what opens it counts their turns only. A handoff
of person "" is the whole conversation's (a direct chat, HTTP), and holds everyone."""

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    String,
    bindparam,
    case,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.chat.outcome import BOT_ANSWERED
from app.chat.types import TurnRequest
from app.db.models import Conversation, Feedback, Handoff, Turn
from app.handoff.draft import Draft, DraftStatus

HandoffStatus = Literal["open", "claimed", "resolved"]
ACTIVE: tuple[HandoffStatus, ...] = ("open", "claimed")
# Turns the handoff took from the bot (app/chat/outcome.py).
NOT_BY_BOT = ("handed_off", "quiet", "bot_back")


class HandoffConflict(Exception):
    """The handoff is not in the state the change needs (claimed by someone else, resolved)."""

    def __init__(self, handoff: Handoff, message: str) -> None:
        super().__init__(message)
        self.handoff = handoff


WHOLE_CONVERSATION = ""


def person_of(person: str | None) -> str:
    """`handoffs.person` of a turn's person (None: the whole conversation's)."""
    return person or WHOLE_CONVERSATION


def people_of(request: TurnRequest) -> list[str]:
    """Whose handoff holds the request: its author's, then (in a shared chat) that of the
    person whose message it replies to."""
    replied = [request.replying_to] if request.replying_to else []
    return [person_of(request.person), *replied]


def _holding(theirs: ColumnElement[bool]) -> ColumnElement[bool]:
    """The whole conversation's handoff, or one that `theirs` admits."""
    return or_(Handoff.person == WHOLE_CONVERSATION, theirs)


_HOLDING = (
    select(Handoff)
    .join(Conversation, Conversation.id == Handoff.conversation_id)
    .where(
        Conversation.key == bindparam("key"),
        Handoff.status.in_(ACTIVE),
        _holding(Handoff.person.in_(bindparam("people", expanding=True))),
    )
    # The author's own first: it is theirs to give back (`route`).
    .order_by(case((Handoff.person == bindparam("author"), 0), else_=1))
    .limit(1)
)


async def holding(
    session: AsyncSession, conversation_key: str, people: list[str]
) -> Handoff | None:
    """The handoff not yet resolved that holds a message of `people` (`people_of`): one of
    theirs, or the whole conversation's."""
    # Built once: every turn of a handed-over audience asks (see app/db/queries.py).
    parameters = {"key": conversation_key, "people": people, "author": people[0]}
    return await session.scalar(_HOLDING, parameters)


async def insert_open(session: AsyncSession, handoff: Handoff) -> bool:
    """Add an open handoff; False (nothing added) when the conversation has one already."""
    try:
        async with session.begin_nested():
            session.add(handoff)
            await session.flush()
    except IntegrityError:
        return False
    return True


async def last_resolved_at(
    session: AsyncSession, conversation_id: int, person: str | None
) -> datetime | None:
    """Triggers count what happened since the person's last handoff was resolved."""
    return await session.scalar(
        select(func.max(Handoff.resolved_at)).where(
            Handoff.conversation_id == conversation_id,
            _holding(Handoff.person == person_of(person)),
        )
    )


def _outcomes_since_resolved() -> Select[str | None]:
    conversation = bindparam("conversation_id", type_=Integer)
    person = bindparam("person", type_=String)
    resolved = (
        select(func.max(Handoff.resolved_at))
        .where(
            Handoff.conversation_id == conversation,
            _holding(Handoff.person == func.coalesce(person, WHOLE_CONVERSATION)),
        )
        .scalar_subquery()
    )
    return (
        select(Turn.outcome)
        .where(
            Turn.conversation_id == conversation,
            Turn.person.is_not_distinct_from(person),
            Turn.outcome.in_(BOT_ANSWERED),
            or_(resolved.is_(None), Turn.finished_at > resolved),
        )
        .order_by(Turn.number.desc())
        .limit(bindparam("count"))
    )


_OUTCOMES_SINCE_RESOLVED = _outcomes_since_resolved()


async def outcomes_since_resolved(
    session: AsyncSession, conversation_id: int, person: str | None, count: int
) -> list[str]:
    """The outcomes of the last `count` turns of `person` (None: a direct chat's or an HTTP
    conversation's) the bot answered itself, newest first, since their last handoff was
    resolved, in one statement."""
    parameters = {"conversation_id": conversation_id, "person": person, "count": count}
    return [str(o) for o in await session.scalars(_OUTCOMES_SINCE_RESOLVED, parameters)]


async def turns_with_outcome(
    session: AsyncSession, conversation_id: int, outcomes: tuple[str, ...]
) -> set[int]:
    query = select(Turn.number).where(
        Turn.conversation_id == conversation_id, Turn.outcome.in_(outcomes)
    )
    return set(await session.scalars(query))


async def thumbs_down(
    session: AsyncSession, conversation_id: int, person: str | None, since: datetime | None
) -> int:
    """👎 on the answers to `person`'s turns since `since`."""
    query = (
        select(func.count(Feedback.id))
        .join(
            Turn,
            (Turn.conversation_id == Feedback.conversation_id) & (Turn.number == Feedback.turn),
        )
        .where(
            Feedback.conversation_id == conversation_id,
            Feedback.rating == "down",
            Turn.person.is_not_distinct_from(person),
        )
    )
    if since is not None:
        query = query.where(Feedback.created_at > since)
    return int(await session.scalar(query) or 0)


async def last_turn_of(session: AsyncSession, conversation_id: int, person: str) -> int | None:
    """The number of the person's last turn in the conversation (None: none yet)."""
    return await session.scalar(
        select(func.max(Turn.number)).where(
            Turn.conversation_id == conversation_id, Turn.person == person
        )
    )


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


async def set_draft(session: AsyncSession, handoff_id: int, draft: dict[str, Any]) -> None:
    await session.execute(
        update(Handoff)
        .where(Handoff.id == handoff_id)
        .values(draft=draft)
        .execution_options(synchronize_session=False)
    )


async def settle_draft(
    session: AsyncSession, handoff_id: int, status: DraftStatus
) -> Handoff | None:
    """Mark the handoff's draft `sent` or `dismissed`; a handoff whose draft is still being
    made, or holds no reply, or was settled already, stays as it is."""
    handoff = await _fresh(session, handoff_id)
    if handoff is None or handoff.draft is None or handoff.draft.get("status") != "drafted":
        return handoff
    settled = Draft.from_json(handoff.draft).settled(status).to_json()
    await session.execute(
        update(Handoff)
        .where(Handoff.id == handoff_id)
        .values(draft=settled)
        .execution_options(synchronize_session=False)
    )
    return await _fresh(session, handoff_id)
