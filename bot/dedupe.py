"""Each Telegram update is handled once, whatever redelivers it: a restart before the
polling offset was confirmed, a webhook retry, another replica. The claim is a row in the
shared database keyed by the bot and the update id; the primary key makes the second claim
fail.

Telegram keeps an update for a day at most, so an older claim cannot be a redelivery:
when, after a week without updates, Telegram starts numbering afresh and an id comes again,
the old claim is taken over and the new message answered."""

from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ProcessedUpdate

REDELIVERY_WINDOW = timedelta(days=2)  # Telegram's day, with a margin for clocks


async def claim_update(session: AsyncSession, bot_id: int, update_id: int) -> bool:
    """True the first time this bot's update id is claimed (or when the claim is older
    than any redelivery), False for a duplicate. Commits."""
    now = datetime.now(UTC)
    session.add(ProcessedUpdate(bot_id=bot_id, update_id=update_id, processed_at=now))
    try:
        await session.commit()
    except IntegrityError:
        await session.rollback()
    else:
        return True
    # One statement, so that of two replicas taking over a stale claim only one succeeds.
    taken_over = await session.execute(
        update(ProcessedUpdate)
        .where(
            ProcessedUpdate.bot_id == bot_id,
            ProcessedUpdate.update_id == update_id,
            ProcessedUpdate.processed_at < now - REDELIVERY_WINDOW,
        )
        .values(processed_at=now)
    )
    await session.commit()
    return bool(taken_over.rowcount)  # type: ignore[attr-defined]


async def forget_updates_before(session: AsyncSession, cutoff: datetime) -> int:
    """Drop old claims, of every bot. Commits; returns how many rows went."""
    result = await session.execute(
        delete(ProcessedUpdate).where(ProcessedUpdate.processed_at < cutoff)
    )
    await session.commit()
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
