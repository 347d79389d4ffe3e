"""Fixtures: a handful of GnuCash manual pages (tests/fixtures/gnucash) in a temporary
local Qdrant (Qdrant Edge, the embedded default; and qdrant-client's local mode, whose
client groups by page as a server does). The session-wide ones are read-only: a test that
changes pages or the index makes its own (`copy_pages`, `KnowledgeBase.open_local` on its
`tmp_path`)."""

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from knowledge.store import IngestReport, KnowledgeBase
from tests.conftest import FIXTURES
from tests.knowledge.help_center import HelpCenter, serving

GNUCASH = FIXTURES / "gnucash"
# Small pages that answer the questions in test_retrieval.py, plus distractors.
SUBSET = [
    "gnucash-help-en/busnss-ar-invoices1.html",
    "gnucash-help-en/busnss-ar-customers1.html",
    "gnucash-help-en/acct-reconcile.html",
    "gnucash-help-en/chang-lang.html",
    "gnucash-help-en/trans-export.html",
    "gnucash-help-en/trans-reverse.html",
    "gnucash-help-en/acct-types.html",
    "gnucash-help-en/tool-close-book.html",
    "gnucash-help-en/getting-started.html",
]


def copy_pages(pages: list[str], root: Path) -> Path:
    """`pages` of the fixture manuals under `root`, at their relative paths."""
    for relative in pages:
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(GNUCASH / relative, target)
    return root


@pytest.fixture(scope="session")
def gnucash_subset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SUBSET pages in a folder of their own; tests only read it."""
    return copy_pages(SUBSET, tmp_path_factory.mktemp("gnucash"))


@pytest.fixture(scope="session")
def _session_base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeBase]:
    kb = KnowledgeBase.open_local(tmp_path_factory.mktemp("qdrant"), collection="test")
    yield kb
    kb.close()


@pytest.fixture(scope="session")
def first_ingest(_session_base: KnowledgeBase, gnucash_subset: Path) -> IngestReport:
    return _session_base.ingest(gnucash_subset)


@pytest.fixture(scope="session")
def knowledge_base(_session_base: KnowledgeBase, first_ingest: IngestReport) -> KnowledgeBase:
    """The SUBSET, ingested once per session. Tests search it and may re-ingest the
    unchanged folder; they neither change its attributes nor its pages."""
    return _session_base


@pytest.fixture(scope="session")
def grouping_base(
    tmp_path_factory: pytest.TempPathFactory, gnucash_subset: Path
) -> Iterator[KnowledgeBase]:
    """The SUBSET in qdrant-client's local mode, searched with Qdrant's grouping by page
    (`query_points_groups`, a server's path: Qdrant Edge has no grouping)."""
    kb = KnowledgeBase.open_local(
        tmp_path_factory.mktemp("qdrant-local"),
        collection="test",
        engine="qdrant-local",
        group_in_qdrant=True,
    )
    kb.ingest(gnucash_subset)
    yield kb
    kb.close()


@pytest.fixture
def help_center() -> Iterator[HelpCenter]:
    """A help center on a loopback port (tests/knowledge/help_center.py)."""
    with serving() as site:
        yield site
