"""The knowledge base's parts over one store: its lifetime, ingest and stats on their own,
and the search Qdrant groups by page (a server's path, run here on qdrant-client's local
mode, whose client implements `query_points_groups` too)."""

from collections import Counter
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from app.settings import KnowledgeSettings
from knowledge import stores
from knowledge.embeddings import get_embedder
from knowledge.ingest import Ingester
from knowledge.qdrant_server import QdrantClientStore
from knowledge.stats import collection_stats
from knowledge.store import KnowledgeBase
from tests.knowledge.conftest import copy_pages
from tests.knowledge.counting import CountingEmbedder
from tests.knowledge.test_retrieval import QUESTIONS


@pytest.mark.parametrize(("question", "gold_page"), QUESTIONS)
def test_a_search_grouped_by_qdrant_retrieves_the_gold_page_in_top_5(
    grouping_base: KnowledgeBase, question: str, gold_page: str
) -> None:
    sources = [passage.source for passage in grouping_base.search(question, 5)]
    assert f"gnucash-help-en/{gold_page}" in sources


@pytest.mark.parametrize(("question", "gold_page"), QUESTIONS)
def test_qdrant_edge_retrieves_the_gold_page_in_top_5_as_the_server_path_does(
    knowledge_base: KnowledgeBase, question: str, gold_page: str
) -> None:
    assert knowledge_base.knowledge.location.startswith("local:")
    sources = [passage.source for passage in knowledge_base.search(question, 5)]
    assert f"gnucash-help-en/{gold_page}" in sources


@pytest.mark.parametrize("hybrid", [False, True])
def test_qdrant_groups_at_most_passages_per_page_from_one_page(
    grouping_base: KnowledgeBase, hybrid: bool
) -> None:
    query = "create, edit, post and print a customer invoice"
    grouped = grouping_base.with_options(hybrid=hybrid)
    sources = [passage.source for passage in grouped.search(query, 5)]
    assert len(sources) == len(set(sources)) == 5

    passages = grouped.with_options(passages_per_page=3).search(query, 5)
    per_page = Counter(passage.source for passage in passages)
    assert len(passages) == 5
    assert 1 < max(per_page.values()) <= 3
    scores = [passage.score for passage in passages]
    assert scores == sorted(scores, reverse=True)


def test_qdrant_groups_only_on_a_server(tmp_path: Path) -> None:
    settings = KnowledgeSettings(qdrant_path=tmp_path / "qdrant")
    local = KnowledgeBase.from_settings(settings)
    try:
        assert not local.options.group_in_qdrant
        # A server's client (no request is made: only the location decides).
        url = "http://qdrant.internal:6333"
        server = QdrantClientStore(url, client=QdrantClient(url=url))
        assert KnowledgeBase.over(server, settings).options.group_in_qdrant
    finally:
        local.close()


def test_ingest_and_stats_work_on_the_shared_client_that_search_uses(tmp_path: Path) -> None:
    folder = copy_pages(["gnucash-help-en/chang-lang.html"], tmp_path / "manuals")
    knowledge = stores.open_local(tmp_path / "qdrant")
    try:
        kb = KnowledgeBase(knowledge, collection="parts")
        query = "reverse a wrong transaction"
        kb.ingest(folder)
        assert kb.search(query, 1)[0].source == "gnucash-help-en/chang-lang.html"
        copy_pages(["gnucash-help-en/trans-reverse.html"], folder)
        report = Ingester(knowledge, get_embedder()).ingest(folder, "parts")
        assert report.documents_added == 1
        # The ingester dropped the shared keyword index, so the search sees the new page.
        assert kb.search(query, 1)[0].source == "gnucash-help-en/trans-reverse.html"
        stats = collection_stats(knowledge, "parts", embedder=kb.embedder.name, hybrid=False)
        assert (stats.documents, stats.location) == (2, f"local:{(tmp_path / 'qdrant').resolve()}")
        assert stats == kb.stats()
        assert (
            collection_stats(knowledge, "none", embedder=kb.embedder.name, hybrid=False).chunks == 0
        )
    finally:
        knowledge.release()


def test_the_client_stays_open_until_its_last_holder_releases_it(tmp_path: Path) -> None:
    settings = KnowledgeSettings(qdrant_path=tmp_path / "qdrant")
    held = stores.acquire(settings)
    view = KnowledgeBase.over(held, settings)
    owner = KnowledgeBase.from_settings(settings)
    assert owner.knowledge is held
    view.close()  # a view over a held client releases nothing
    owner.close()
    assert view.ping()
    held.release()
    assert not view.ping()
    again = stores.acquire(settings)  # a fresh client: the folder's lock was freed
    try:
        assert again is not held and again.ping()
    finally:
        again.release()


def test_qdrant_hands_the_fusion_candidates_of_distinct_pages(
    grouping_base: KnowledgeBase,
) -> None:
    query = "create, edit, post and print a customer invoice"
    dense = [float(x) for x in grouping_base.embedder.embed_query(query)]
    for per_page in (1, 3):
        grouped = grouping_base.with_options(passages_per_page=per_page)
        points = grouped._points(grouping_base.collection, query, dense, 40, ["en"])
        per_source = Counter((point.payload or {})["source"] for point in points)
        assert len(per_source) == 8  # every page with text (the subset's TOC has none)
        assert max(per_source.values()) == per_page
        scores = [point.score for point in points]
        assert scores == sorted(scores, reverse=True)


def test_a_passage_repeated_across_batches_is_embedded_once_and_stored_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = "gnucash-help-en/trans-reverse.html"
    folder = tmp_path / "manuals"
    copy_pages([page], folder / "a")
    copy_pages([page], folder / "b")
    monkeypatch.setattr("knowledge.ingest.EMBED_BATCH", 1)  # each file a batch of its own
    embedder = CountingEmbedder()
    knowledge = stores.open_local(tmp_path / "qdrant")
    try:
        report = Ingester(knowledge, embedder).ingest(folder, "twice")
        points = list(knowledge.scroll("twice", ["source", "chunk"]))
        assert report.documents_added == 2
        assert len(points) == report.chunks_added == 2 * len(embedder.passages)
        assert len(set(embedder.passages)) == len(embedder.passages)
        assert {payload["source"] for _, payload in points} == {f"a/{page}", f"b/{page}"}
    finally:
        knowledge.release()
