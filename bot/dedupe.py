"""Each Telegram update is handled once, whatever redelivers it: a restart before the
polling offset was confirmed, a webhook retry, another replica. The claim is a row in the
shared database; the primary key makes the second claim fail."""

from datetime import datetime

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ProcessedUpdate


async def claim_update(session: AsyncSession, update_id: int) -> bool:
    """True the first time an update id is claimed, False for a duplicate. Commits."""
    session.add(ProcessedUpdate(update_id=update_id))
    try:
        await session.commit()
    except IntegrityError:
        await session.rollback()
        return False
    return True


async def forget_updates_before(session: AsyncSession, cutoff: datetime) -> int:
    """Drop old claims; Telegram redelivers for a day at most, and after a week without
    updates it may start update ids afresh. Commits; returns how many rows went."""
    result = await session.execute(
        delete(ProcessedUpdate).where(ProcessedUpdate.processed_at < cutoff)
    )
    await session.commit()
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
