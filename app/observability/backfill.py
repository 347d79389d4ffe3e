"""`supportbot langfuse backfill`: send again the feedback scores Langfuse never confirmed.

The service sends a rating as the `user_feedback` score the moment it is stored; during a
Langfuse outage the SDK drops it after its retries. Each score's id is derived from its
feedback row, so sending it again replaces rather than adds, and a row is marked
`score_confirmed_at` once Langfuse has acknowledged it.
"""

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import Feedback, Turn
from app.observability.tracing import Tracer, feedback_score_id


@dataclass(frozen=True)
class Backfill:
    sent: int
    confirmed: int


async def backfill_feedback(sessions: async_sessionmaker[AsyncSession], tracer: Tracer) -> Backfill:
    """Send every unconfirmed rating of a traced turn, wait for Langfuse (within the
    tracer's shutdown bound; the tracer is closed after) and mark what it acknowledged."""
    async with sessions() as session:
        rows = (
            await session.execute(
                select(Feedback, Turn.trace_id)
                .join(
                    Turn,
                    (Turn.conversation_id == Feedback.conversation_id)
                    & (Turn.number == Feedback.turn),
                )
                .where(Feedback.score_confirmed_at.is_(None), Turn.trace_id.is_not(None))
                .order_by(Feedback.id)
            )
        ).all()
    by_score: dict[str, int] = {}
    for feedback, trace_id in rows:
        assert trace_id is not None  # selected so
        score_id = feedback_score_id(trace_id, feedback.id)
        tracer.feedback(trace_id, score_id, feedback.rating == "up", feedback.comment)
        by_score[score_id] = feedback.id
    tracer.close()
    confirmed = [by_score[score_id] for score_id in tracer.delivered(list(by_score))]
    if confirmed:
        async with sessions() as session:
            await session.execute(
                update(Feedback)
                .where(Feedback.id.in_(confirmed))
                .values(score_confirmed_at=datetime.now(UTC))
            )
            await session.commit()
    return Backfill(sent=len(by_score), confirmed=len(confirmed))
