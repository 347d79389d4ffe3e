"""One configured documentation source (`knowledge.sources`) mirrored once: a folder
ingested as `supportbot kb ingest` does, a help center synced as `supportbot kb sync` does,
the sample knowledge base taken out first as both do. What the scheduled syncs of
`supportbot serve` run (app/knowledge_sources), on a worker thread.

A folder that is missing or holds no documents fails as a site that lists no pages does,
before anything is written: an unmounted volume does not empty the collection.
"""

from collections.abc import Callable
from pathlib import Path

from knowledge.ingest import BUILDING_INDEX, CALIBRATING, IngestReport, discover_files
from knowledge.settings import DocumentationSource, KnowledgeSettings
from knowledge.store import KnowledgeBase


class NothingToMirror(Exception):
    """The folder is gone or holds no documents: the collection was left as it was."""


class Stopped(Exception):
    """Asked to stop between two documents (the service shuts down): what was written
    stays, the rest waits for the next sync."""


class _StopCheck:
    """A progress callback that raises `Stopped` once `should_stop()` says so: between
    documents, never while the search index or the calibration is being made."""

    def __init__(self, should_stop: Callable[[], bool]) -> None:
        self._should_stop = should_stop

    def __call__(self, source: str) -> None:
        if source not in (BUILDING_INDEX, CALIBRATING) and self._should_stop():
            raise Stopped(f"stopped after {source}")

    def listed(self, pages: int) -> None:
        self("the listing")


def mirror_source(
    kb: KnowledgeBase,
    settings: KnowledgeSettings,
    source: DocumentationSource,
    should_stop: Callable[[], bool] = lambda: False,
) -> IngestReport:
    """Mirror `source` into its collection and calibrate it when it changed. Raises
    `SiteUnavailable` or `NothingToMirror` (nothing written), `Stopped`, or what the store
    raises."""
    progress = _StopCheck(should_stop)
    if source.is_site:
        # Imported when a site is synced: fetching reads HTML with trafilatura, which a
        # service with folder sources only never loads.
        from knowledge.sync import sync_site

        synced = sync_site(
            kb, source.location, settings, source.collection, progress, sample=settings.sample_path
        )
        return synced.ingest
    folder = Path(source.location)
    if not folder.is_dir():
        raise NothingToMirror(f"no such folder: {folder}")
    if not discover_files(folder):
        raise NothingToMirror(f"no HTML, Markdown or PDF files under {folder}")
    kb.replace_sample(settings.sample_path, folder, source.collection)
    return kb.ingest(folder, source.collection, progress)
