"""Scheduled syncs (app/knowledge_sources): a due source is mirrored, what it did is
recorded, a failure is recorded and retried at the next due time, and of several
schedulers on one database (replicas) only one runs a source at a time. On SQLite and
PostgreSQL; the help center is a real HTTP server on a loopback port, time is passed in."""

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.engine import make_async_engine, make_session_factory
from app.db.models import KnowledgeSourceRun
from app.knowledge_sources import runs
from app.knowledge_sources.runs import Counts
from app.knowledge_sources.scheduler import LEASE, STOPPED, SourceScheduler
from app.settings import DbSettings, KnowledgeSettings
from knowledge.mirror import mirror_source
from knowledge.settings import DocumentationSource
from knowledge.store import KnowledgeBase
from tests.knowledge.help_center import (
    EXPORT,
    REFUNDS_CHANGED,
    HelpCenter,
    help_pages,
    sources_of,
)

ALLOWED = KnowledgeSettings(sync_allow_private_addresses=True)
HOUR = timedelta(hours=1)


Sessions = async_sessionmaker[AsyncSession]


@pytest.fixture
async def replicas(database_url: str) -> AsyncIterator[tuple[Sessions, Sessions]]:
    """Two replicas' sessions: an engine (a connection pool) each, on one database."""
    engines = [make_async_engine(DbSettings(url=database_url)) for _ in range(2)]
    yield make_session_factory(engines[0]), make_session_factory(engines[1])
    for engine in engines:
        await engine.dispose()


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    base = KnowledgeBase.open_local(tmp_path / "qdrant", collection="site")
    yield base
    base.close()


@pytest.fixture
def site(help_center: HelpCenter) -> DocumentationSource:
    """The help center's four pages (tests/knowledge/help_center.py), synced hourly."""
    help_pages(help_center)
    return DocumentationSource(location=help_center.url("/help/"), collection="site", every_hours=1)


def scheduler(
    sources: list[DocumentationSource], sessions: Sessions, kb: KnowledgeBase
) -> SourceScheduler:
    return SourceScheduler(sources, sessions, partial(mirror_source, kb, ALLOWED))


async def row(sessions: Sessions, source: DocumentationSource) -> KnowledgeSourceRun:
    async with sessions() as session:
        found = await session.get(KnowledgeSourceRun, runs.source_key(source))
    assert found is not None
    return found


async def test_a_due_site_is_synced_again_when_due_and_a_failure_waits_for_the_next_time(
    help_center: HelpCenter,
    site: DocumentationSource,
    kb: KnowledgeBase,
    replicas: tuple[Sessions, Sessions],
) -> None:
    sessions, _ = replicas
    syncs = scheduler([site], sessions, kb)
    start = datetime.now(UTC)

    [first] = await syncs.run_due(start)
    assert (first.counts, first.error) == (Counts(4, 0, 0, 0), None)
    assert len(sources_of(kb)) == 4

    help_center.requests.clear()
    assert await syncs.run_due(start + HOUR / 2) == []  # not due yet
    assert help_center.requests == []

    # Refunds change, passwords disappear, export moves (its old URL redirects).
    help_center.pages["/help/refunds.html"] = (REFUNDS_CHANGED, "text/html")
    del help_center.pages["/help/passwords.html"]
    help_center.pages["/help/guides/export.html"] = (EXPORT, "text/html")
    del help_center.pages["/help/export.html"]
    help_center.redirects["/help/export.html"] = "/help/guides/export.html"
    help_center.sitemap("/help/invoices.html", "/help/refunds.html", "/help/guides/export.html")
    [second] = await syncs.run_due(start + 2 * HOUR)
    assert (second.counts, second.error) == (Counts(1, 1, 2, 1), None)
    before = sources_of(kb)

    # The site is down: the error is recorded, the collection and the counts stay.
    help_center.statuses["/robots.txt"] = 503
    [failed] = await syncs.run_due(start + 4 * HOUR)
    assert failed.counts is None and failed.error
    assert "robots.txt answered HTTP 503" in failed.error
    assert sources_of(kb) == before
    stored = await row(sessions, site)
    assert (stored.added, stored.changed, stored.removed, stored.unchanged) == (1, 1, 2, 1)
    assert stored.last_error == failed.error and stored.lease_holder is None
    finished = runs.utc(stored.last_finished_at)
    assert finished is not None and runs.next_due(site, stored) == finished + HOUR

    # Retried at the next due time, not before; once through, the error is cleared.
    del help_center.statuses["/robots.txt"]
    help_center.requests.clear()
    assert await syncs.run_due(start + 4.5 * HOUR) == []
    assert help_center.requests == []
    [again] = await syncs.run_due(start + 6 * HOUR)
    assert (again.counts, again.error) == (Counts(0, 0, 0, 3), None)
    assert (await row(sessions, site)).last_error is None


async def wait_for_lease(sessions: Sessions, source: DocumentationSource, holder: str) -> None:
    """Until `holder` holds the source's lease (its sync has started)."""
    for _ in range(2400):
        async with sessions() as session:
            found = await session.get(KnowledgeSourceRun, runs.source_key(source))
        if found is not None and found.lease_holder == holder:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{holder} never took the lease")


async def test_of_two_schedulers_on_one_database_only_one_runs_a_source(
    help_center: HelpCenter,
    site: DocumentationSource,
    kb: KnowledgeBase,
    replicas: tuple[Sessions, Sessions],
) -> None:
    one, other = (scheduler([site], sessions, kb) for sessions in replicas)
    held = help_center.holds["/help/refunds.html"] = threading.Event()
    now = datetime.now(UTC)

    running = asyncio.create_task(one.run_due(now))
    await wait_for_lease(replicas[1], site, one.holder)
    assert await other.run_due(now) == []  # due, but the first replica runs it
    held.set()
    [synced] = await running
    assert synced.counts == Counts(4, 0, 0, 0)
    assert [sent for sent, _ in help_center.asked("/robots.txt")] == [None]  # listed once

    # The other replica runs it when it is due again, the first one then does not.
    [later] = await other.run_due(now + 2 * HOUR)
    assert later.counts == Counts(0, 0, 0, 4)
    assert await one.run_due(now + 2 * HOUR) == []


async def test_a_lease_left_by_a_replica_that_died_is_taken_over_once_it_expires(
    help_center: HelpCenter,
    site: DocumentationSource,
    kb: KnowledgeBase,
    replicas: tuple[Sessions, Sessions],
) -> None:
    now = datetime.now(UTC)
    async with replicas[0]() as session:  # took the lease, then its process was killed
        assert await runs.take_lease(session, site, "gone:1", now, LEASE)
        assert not await runs.take_lease(session, site, "other:2", now, LEASE)

    survivor = scheduler([site], replicas[1], kb)
    assert await survivor.run_due(now + LEASE / 2) == []
    [synced] = await survivor.run_due(now + LEASE + timedelta(seconds=1))
    assert synced.counts == Counts(4, 0, 0, 0)
    async with replicas[0]() as session:  # the dead replica's late writes change nothing
        assert not await runs.finish(session, runs.source_key(site), "gone:1", now, None, "x")
    assert (await row(replicas[0], site)).last_error is None


async def test_stopping_ends_a_running_sync_and_the_next_replica_takes_it_up_at_once(
    help_center: HelpCenter,
    site: DocumentationSource,
    kb: KnowledgeBase,
    replicas: tuple[Sessions, Sessions],
) -> None:
    stopping = scheduler([site], replicas[0], kb)
    held = help_center.holds["/help/refunds.html"] = threading.Event()

    async with stopping.running():  # the background loop finds it due at once
        await wait_for_lease(replicas[0], site, stopping.holder)
        stopping.stop()  # as the server's shutdown does, while a page is on its way
        held.set()
    stored = await row(replicas[0], site)
    assert (stored.lease_holder, stored.last_finished_at, stored.added) == (None, None, None)
    assert stored.last_error == STOPPED
    assert not help_center.asked("/help/export.html")  # nothing fetched after the stop

    [taken_up] = await scheduler([site], replicas[1], kb).run_due()
    assert (taken_up.counts, taken_up.error) == (Counts(4, 0, 0, 0), None)


async def test_a_folder_source_is_ingested_again_and_a_missing_folder_leaves_the_collection(
    tmp_path: Path, kb: KnowledgeBase, replicas: tuple[Sessions, Sessions]
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "invoices.md").write_text("# Invoices\n\nOpen Billing and choose New invoice.\n")
    (folder / "refunds.md").write_text("# Refunds\n\nRefunds take five business days.\n")
    source = DocumentationSource(location=str(folder), collection="site", every_hours=1)
    syncs = scheduler([source], replicas[0], kb)
    now = datetime.now(UTC)

    [first] = await syncs.run_due(now)
    assert (first.counts, first.error) == (Counts(2, 0, 0, 0), None)
    (folder / "refunds.md").unlink()
    [second] = await syncs.run_due(now + 2 * HOUR)
    assert (second.counts, second.error) == (Counts(0, 0, 1, 1), None)
    before = sources_of(kb)

    # An empty mount point, then none: an unmounted volume, not "every page was deleted".
    (folder / "invoices.md").unlink()
    [empty] = await syncs.run_due(now + 4 * HOUR)
    assert (empty.counts, empty.error) == (None, f"no HTML, Markdown or PDF files under {folder}")
    folder.rmdir()
    [missing] = await syncs.run_due(now + 6 * HOUR)
    assert (missing.counts, missing.error) == (None, f"no such folder: {folder}")
    assert sources_of(kb) == before
