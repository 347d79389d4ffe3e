"""Runs the configured sources' syncs when they are due, in the background of `supportbot
serve`, one replica at a time (the lease, `app.knowledge_sources.runs`).

Each check reads the sources' rows, takes the lease of each one that is due and no replica
runs, and mirrors it on a worker thread (`knowledge.mirror`: ingesting is CPU work and must
not hold up the event loop), one source after another; the lease is renewed while the sync
runs. A sync that fails records its error and is due again `every_hours` later; the loop
itself survives a database that is down. Stopping asks the running sync to end after its
current document, waits for it, and gives its lease back, so that the next replica takes the
source up at once.
"""

import asyncio
import logging
import os
import secrets
import socket
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import anyio
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.knowledge_sources import runs
from app.knowledge_sources.runs import Counts
from app.start_up_errors import one_line
from knowledge.ingest import IngestReport
from knowledge.mirror import Stopped
from knowledge.settings import DocumentationSource

log = logging.getLogger(__name__)

# A lease outlives a replica that died mid-sync by this much at most; renewed every third.
LEASE = timedelta(minutes=5)
# Checks come at least this often (another replica may have ended or given up a sync) and
# at most this often (a source that stays due while another replica runs it).
LONGEST_WAIT_SECONDS = 60.0
SHORTEST_WAIT_SECONDS = 1.0
STOPPED = "stopped before it ended: the service shut down; the next check takes it up again"
LEASE_LOST = "stopped: its lease expired and another replica took the source over"

# Mirrors a source on a worker thread; the callable says when to stop (knowledge.mirror).
Mirror = Callable[[DocumentationSource, Callable[[], bool]], IngestReport]


@dataclass(frozen=True)
class SyncOutcome:
    """What one sync this scheduler ran came to (`counts` None when it wrote nothing)."""

    source: DocumentationSource
    counts: Counts | None
    error: str | None


def replica_name() -> str:
    """Who holds a lease: the host, the process and a random part (two schedulers of one
    process are two holders)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class SourceScheduler:
    """The syncs of `sources` as one replica runs them (`holder` names it in the leases)."""

    def __init__(
        self,
        sources: Sequence[DocumentationSource],
        sessions: async_sessionmaker[AsyncSession],
        mirror: Mirror,
        *,
        holder: str | None = None,
        lease: timedelta = LEASE,
    ) -> None:
        self.sources = list(sources)
        self.sessions = sessions
        self.mirror = mirror
        self.holder = holder or replica_name()
        self.lease = lease
        self._stopping = threading.Event()  # read by the sync's thread between documents
        self._wake = asyncio.Event()

    async def run_due(self, now: datetime | None = None) -> list[SyncOutcome]:
        """Sync, one after another, each source that is due at `now` (default: now) and
        that no replica runs; what each came to."""
        outcomes = []
        for source in self.sources:
            if self._stopping.is_set():
                break
            moment = now or datetime.now(UTC)
            async with self.sessions() as session:
                taken = await runs.take_lease(session, source, self.holder, moment, self.lease)
            if taken:
                outcomes.append(await self._sync(source, moment))
        return outcomes

    async def _sync(self, source: DocumentationSource, started: datetime) -> SyncOutcome:
        key = runs.source_key(source)
        lost = threading.Event()
        renewing = asyncio.create_task(self._renew(key, started, lost))

        def should_stop() -> bool:
            return self._stopping.is_set() or lost.is_set()

        stopped = False
        try:
            # Not cancellable: a stop waits for the thread, which ends after its document.
            report = await anyio.to_thread.run_sync(self.mirror, source, should_stop)
        except Stopped:
            stopped = True
            outcome = SyncOutcome(source, None, LEASE_LOST if lost.is_set() else STOPPED)
        except Exception as failed:
            outcome = SyncOutcome(source, None, one_line(failed))
        else:
            outcome = SyncOutcome(source, Counts.of(report), _page_errors(report))
        finally:
            renewing.cancel()
        if outcome.counts:
            log.info("synced %s: documents %s", source.location, outcome.counts)
        if outcome.error:
            log.warning("sync of %s: %s", source.location, outcome.error)
        async with self.sessions() as session:
            if stopped:  # a lease taken over is another replica's: nothing changes
                await runs.give_back(session, key, self.holder, STOPPED)
            else:
                await runs.finish(
                    session, key, self.holder, _later(started), outcome.counts, outcome.error
                )
        return outcome

    async def _renew(self, key: str, started: datetime, lost: threading.Event) -> None:
        """Extend the lease every third of it until cancelled; `lost` is set when it is no
        longer this scheduler's."""
        every = self.lease.total_seconds() / 3
        moment = started
        while True:
            await asyncio.sleep(every)
            moment = _later(moment)
            try:
                async with self.sessions() as session:
                    held = await runs.renew_lease(session, key, self.holder, moment, self.lease)
            except Exception as failed:  # the database is down: try again next time
                log.warning("could not renew the lease of a sync: %s", one_line(failed))
                continue
            if not held:
                lost.set()
                return

    async def run_forever(self) -> None:
        """Check for due sources until `stop`: at least every LONGEST_WAIT_SECONDS, and
        when the next one is due."""
        while not self._stopping.is_set():
            try:
                await self.run_due()
                wait = await self._seconds_to_next_due()
            except Exception as failed:  # the database is down: the next check tries again
                log.warning("scheduled syncs: %s", one_line(failed))
                wait = LONGEST_WAIT_SECONDS
            with suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def _seconds_to_next_due(self) -> float:
        now = datetime.now(UTC)
        async with self.sessions() as session:
            rows = await runs.runs_of(session, self.sources)
        waits = [LONGEST_WAIT_SECONDS]
        for source in self.sources:
            run = rows.get(runs.source_key(source))
            due = runs.next_due(source, run)
            if due is not None and not runs.running(run, now):
                waits.append((due - now).total_seconds())
        return max(SHORTEST_WAIT_SECONDS, min(waits))

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    @asynccontextmanager
    async def running(self) -> AsyncIterator["SourceScheduler"]:
        """Check in the background while inside (nothing runs without sources); on the way
        out, stop and wait for a running sync to end after its current document."""
        task = asyncio.create_task(self.run_forever()) if self.sources else None
        try:
            yield self
        finally:
            self.stop()
            if task is not None:
                await task


def _later(moment: datetime) -> datetime:
    """A time after `moment` even on a clock that did not move (a test's fixed `now`)."""
    return max(moment + timedelta(microseconds=1), datetime.now(UTC))


def _page_errors(report: IngestReport) -> str | None:
    """The documents that failed in a sync that went through, as one line."""
    if not report.errors:
        return None
    source, message = next(iter(report.errors.items()))
    more = f" (and {len(report.errors) - 1} more)" if len(report.errors) > 1 else ""
    return f"{len(report.errors)} documents failed: {source}: {message}{more}"
