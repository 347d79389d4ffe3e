"""Fixtures: a handful of GnuCash manual pages (read from ../shared beside the repo) in a
temporary local Qdrant, ingested once per test session."""

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from knowledge.store import IngestReport, KnowledgeBase
from tests.conftest import SHARED

GNUCASH = SHARED / "kb" / "gnucash"
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


@pytest.fixture(scope="session")
def gnucash_subset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy, so that tests may change and delete pages; the shared folder is read-only."""
    root = tmp_path_factory.mktemp("gnucash")
    for relative in SUBSET:
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(GNUCASH / relative, target)
    return root


@pytest.fixture(scope="session")
def knowledge_base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeBase]:
    kb = KnowledgeBase.open_local(tmp_path_factory.mktemp("qdrant"), collection="test")
    yield kb
    kb.close()


@pytest.fixture(scope="session")
def first_ingest(knowledge_base: KnowledgeBase, gnucash_subset: Path) -> IngestReport:
    return knowledge_base.ingest(gnucash_subset)
