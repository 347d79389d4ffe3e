"""The table of scheduled syncs (`knowledge_source_runs`): a source's lease and what its
last sync did.

A lease is taken by one conditional UPDATE (the lease is free or has expired, and the
source is due), so of several replicas exactly one gets it: on PostgreSQL a second UPDATE
of the row waits for the first to commit and then finds the lease taken; SQLite writes one
transaction at a time. The row is made by a plain INSERT whose duplicate is ignored. Every
later write names the holder, so a replica whose lease was taken over changes nothing.
Times are UTC, compared in the database as stored.
"""

import hashlib
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import KnowledgeSourceRun
from knowledge.ingest import IngestReport
from knowledge.settings import DocumentationSource

Row = KnowledgeSourceRun


def source_key(source: DocumentationSource) -> str:
    return hashlib.sha256(f"{source.collection}\n{source.location}".encode()).hexdigest()


@dataclass(frozen=True)
class Counts:
    """A sync's documents: +added ~changed -removed =unchanged."""

    added: int
    changed: int
    removed: int
    unchanged: int

    def __str__(self) -> str:
        return f"+{self.added} ~{self.changed} -{self.removed} ={self.unchanged}"

    @classmethod
    def of(cls, report: IngestReport) -> "Counts":
        return cls(
            report.documents_added,
            report.documents_updated,
            report.documents_deleted,
            report.documents_unchanged,
        )


def utc(moment: datetime | None) -> datetime | None:
    """A stored time as an aware one (SQLite gives it back without its zone)."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def next_due(source: DocumentationSource, run: Row | None) -> datetime | None:
    """When the source is due again: `every_hours` after its last sync ended; None when
    none has ended yet (due now)."""
    finished = utc(run.last_finished_at) if run else None
    return finished + timedelta(hours=source.every_hours) if finished else None


def running(run: Row | None, now: datetime) -> bool:
    """Whether a replica holds the source's lease now."""
    expires = utc(run.lease_expires_at) if run else None
    return expires is not None and expires > now


async def take_lease(
    session: AsyncSession,
    source: DocumentationSource,
    holder: str,
    now: datetime,
    lease: timedelta,
) -> bool:
    """Take the source's lease for `holder` when it is free and the source is due, and
    mark the sync started. Commits; False when another replica holds it or it is not due."""
    key = source_key(source)
    if await session.get(Row, key) is None:
        session.add(Row(source_key=key, collection=source.collection, location=source.location))
        try:
            await session.commit()
        except IntegrityError:  # another replica made it first
            await session.rollback()
    due_since = now - timedelta(hours=source.every_hours)
    taken = await session.execute(
        update(Row)
        .where(
            Row.source_key == key,
            or_(Row.lease_expires_at.is_(None), Row.lease_expires_at <= now),
            or_(Row.last_finished_at.is_(None), Row.last_finished_at <= due_since),
        )
        .values(lease_holder=holder, lease_expires_at=now + lease, last_started_at=now)
        .execution_options(synchronize_session=False)
    )
    await session.commit()
    return bool(taken.rowcount == 1)  # type: ignore[attr-defined]


async def renew_lease(
    session: AsyncSession, key: str, holder: str, now: datetime, lease: timedelta
) -> bool:
    """Extend `holder`'s lease while its sync runs. Commits; False when it is no longer
    theirs (it expired and another replica took it)."""
    return await _held_update(session, key, holder, lease_expires_at=now + lease)


async def finish(
    session: AsyncSession,
    key: str,
    holder: str,
    now: datetime,
    counts: Counts | None,
    error: str | None,
) -> bool:
    """Record a sync that ended (`counts` None: it changed nothing, e.g. the site could not
    be listed) and give the lease back. Commits; False when the lease was no longer theirs."""
    values: dict[str, Any] = {"last_finished_at": now, "last_error": error}
    if counts is not None:
        values.update(asdict(counts))
    return await _held_update(
        session, key, holder, lease_holder=None, lease_expires_at=None, **values
    )


async def give_back(session: AsyncSession, key: str, holder: str, why: str) -> bool:
    """Give the lease back without ending the sync (stopped by a shutdown): the source
    stays due, for the next replica. Commits."""
    return await _held_update(
        session, key, holder, lease_holder=None, lease_expires_at=None, last_error=why
    )


async def _held_update(session: AsyncSession, key: str, holder: str, **values: Any) -> bool:
    changed = await session.execute(
        update(Row)
        .where(Row.source_key == key, Row.lease_holder == holder)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    await session.commit()
    return bool(changed.rowcount == 1)  # type: ignore[attr-defined]


async def runs_of(session: AsyncSession, sources: list[DocumentationSource]) -> dict[str, Row]:
    """The stored row of each source that has one, by `source_key`."""
    keys = [source_key(source) for source in sources]
    if not keys:
        return {}
    found = await session.scalars(select(Row).where(Row.source_key.in_(keys)))
    return {run.source_key: run for run in found}


@dataclass(frozen=True)
class SourceStatus:
    """A configured source's syncs as the staff see them."""

    source: DocumentationSource
    running: bool  # a replica holds its lease now
    last_started_at: datetime | None
    last_finished_at: datetime | None
    counts: Counts | None  # of the last sync that went through
    last_error: str | None  # of the last sync; None when it went through clean
    next_due_at: datetime | None  # None: no sync has ended yet, due now


async def statuses(
    session: AsyncSession, sources: list[DocumentationSource], now: datetime
) -> list[SourceStatus]:
    rows = await runs_of(session, sources)
    found = []
    for source in sources:
        run = rows.get(source_key(source))
        counts = (
            Counts(run.added, run.changed or 0, run.removed or 0, run.unchanged or 0)
            if run is not None and run.added is not None
            else None
        )
        found.append(
            SourceStatus(
                source=source,
                running=running(run, now),
                last_started_at=utc(run.last_started_at) if run else None,
                last_finished_at=utc(run.last_finished_at) if run else None,
                counts=counts,
                last_error=run.last_error if run else None,
                next_due_at=next_due(source, run),
            )
        )
    return found
