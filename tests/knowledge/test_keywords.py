"""In-process BM25, its fusion with the dense search, the languages a search takes
passages in, and knowledge bases opened from settings."""

import socket
from pathlib import Path

import numpy as np
import pytest

from app.settings import KnowledgeSettings
from knowledge.keywords import KeywordIndex, query_language, wordllama
from knowledge.store import KnowledgeBase
from knowledge.types import Passage
from tests.knowledge.conftest import copy_pages


def _passage(text: str, source: str) -> Passage:
    return Passage(text=text, title="Page", heading="Manual > Page", source=source)


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("How do I reconcile my account?", "en"),
        ("Как сверить банковский счёт?", "ru"),
        ("Wie buche ich die Zahlung?", "de"),
        ("Wo ist das Menü", "de"),
        ("Kann ich das PDF anhängen", "de"),
    ],
)
def test_query_language_tells_russian_german_and_english_apart(text: str, language: str) -> None:
    assert query_language(text) == language


def test_keyword_index_matches_word_forms_and_scores_relative_to_the_best() -> None:
    index = KeywordIndex(
        [
            ("a", _passage("Scheduled transactions are created automatically.", "a.html")),
            ("b", _passage("Reconcile the account with the bank statement.", "b.html")),
            ("c", _passage("Post the invoice to accounts receivable.", "c.html")),
        ],
        "en",
    )
    hits = index.search("reconciling statements", 5)
    assert [point_id for point_id, _ in hits] == ["b"]
    assert hits[0][1].score == 1.0
    assert hits[0][1].passage.source == "b.html"
    assert index.search("quantum chromodynamics", 5) == []
    assert KeywordIndex([], "en").search("invoice", 5) == []


def test_keyword_index_stems_with_the_documentation_language() -> None:
    german = KeywordIndex([("a", _passage("Buchungen stornieren", "a.html"))], "de")
    assert german.search("Buchung", 5)  # Snowball German: buchungen ~ buchung
    english = KeywordIndex([("a", _passage("Buchungen stornieren", "a.html"))], "en")
    assert not english.search("Buchung", 5)


def test_an_english_query_adds_bm25_to_the_dense_score(knowledge_base: KnowledgeBase) -> None:
    query = "export transactions to a CSV file"
    dense = knowledge_base.with_options(keyword_weight=0.0).search(query, 3)
    fused = knowledge_base.search(query, 3)
    assert fused[0].source == "gnucash-help-en/trans-export.html"
    by_source = {passage.source: passage.score for passage in dense}
    best = fused[0]
    assert best.score > by_source[best.source]
    assert best.score <= by_source[best.source] + knowledge_base.keyword_weight + 1e-6


def test_a_query_in_a_language_no_page_is_written_in_gets_no_bm25_on_its_own_words(
    knowledge_base: KnowledgeBase,
) -> None:
    """BM25 knows one language's words: over English pages a German question's own words
    would only add noise; it is scored on them put into the pages' vocabulary
    (knowledge/word_translation.py; its multilingual view: tests/knowledge/test_crosslingual.py)."""
    query = "Wie exportiere ich alle Buchungen als CSV-Datei für die Tabelle?"

    def key(passage: Passage) -> tuple[str, str, str]:
        return passage.source, passage.heading, passage.text

    bm25_off = {
        key(p): p.score for p in knowledge_base.with_options(keyword_weight=0.0).search(query, 12)
    }
    index = knowledge_base._keyword_index(knowledge_base.collection, "en")
    own_words = {key(hit.passage): hit.score for _, hit in index.search(query, 96)}
    raised = {
        key(p): p.score - bm25_off[key(p)]
        for p in knowledge_base.search(query, 12)
        if key(p) in bm25_off
    }
    weight = knowledge_base.keyword_weight
    assert any(extra > 1e-6 for extra in raised.values())  # its translated words'
    assert all(-1e-9 <= extra <= weight + 1e-6 for extra in raised.values())
    assert any(
        extra != pytest.approx(weight * own_words.get(passage, 0.0), abs=1e-6)
        for passage, extra in raised.items()
    )


def test_a_query_is_scored_by_bm25_over_the_pages_in_its_own_language(tmp_path: Path) -> None:
    """A German question on English documentation that also holds a German page: BM25
    over the German passages adds to theirs, the English ones keep their cosine."""
    english, german = (
        "gnucash-help-en/busnss-ar-invoices1.html",
        "gnucash-guide-de/bus-ar-invoices1.html",
    )
    kb = KnowledgeBase.open_local(tmp_path / "qdrant", collection="languages")
    try:
        kb.ingest(copy_pages([english, german], tmp_path / "manuals"))
        query = "Wie erstelle ich eine Rechnung für einen Kunden?"
        dense = {p.source: p.score for p in kb.with_options(keyword_weight=0.0).search(query, 8)}
        fused = {p.source: p.score for p in kb.search(query, 8)}
        assert fused[german] > dense[german]
        assert fused[german] <= dense[german] + kb.keyword_weight + 1e-6
        assert fused[english] == dense[english]
        english_query = "How do I create an invoice for a customer?"
        assert kb.search(english_query, 8) != kb.with_options(
            keyword_weight=0.0, static_weight=0.0
        ).search(english_query, 8)
    finally:
        kb.close()


def test_the_keyword_index_follows_this_process_ingests(tmp_path: Path) -> None:
    folder = copy_pages(["gnucash-help-en/chang-lang.html"], tmp_path / "manuals")
    kb = KnowledgeBase.open_local(tmp_path / "qdrant", collection="kw")
    try:
        kb.ingest(folder)
        query = "reverse a wrong transaction"
        assert all(p.source != "gnucash-help-en/trans-reverse.html" for p in kb.search(query, 3))
        copy_pages(["gnucash-help-en/trans-reverse.html"], folder)
        kb.ingest(folder)
        dense = kb.with_options(keyword_weight=0.0).search(query, 1)[0]
        fused = kb.search(query, 1)[0]
        assert fused.source == "gnucash-help-en/trans-reverse.html"
        assert fused.score > dense.score  # BM25 knows the new page
    finally:
        kb.close()


@pytest.mark.parametrize(
    ("engine", "group_in_qdrant"),
    [("edge", False), ("qdrant-local", False), ("qdrant-local", True)],
)
def test_an_english_query_takes_english_pages_and_a_german_one_german_too(
    tmp_path: Path, engine: str, group_in_qdrant: bool
) -> None:
    pages = ["gnucash-help-en/busnss-ar-invoices1.html", "gnucash-guide-de/bus-ar-invoices1.html"]
    folder = copy_pages(pages, tmp_path / "manuals")
    kb = KnowledgeBase.open_local(
        tmp_path / "qdrant", collection="languages", engine=engine, group_in_qdrant=group_in_qdrant
    )
    try:
        kb.ingest(folder)
        english = kb.search("How do I create an invoice for a customer?", 8)
        assert english
        assert {p.source for p in english} == {"gnucash-help-en/busnss-ar-invoices1.html"}
        german = kb.search("Wie erstelle ich eine Rechnung für einen Kunden?", 8)
        assert "gnucash-guide-de/bus-ar-invoices1.html" in {p.source for p in german}
        filtered = kb.search("How do I create an invoice?", 8, language="de")
        assert {p.source for p in filtered} == {"gnucash-guide-de/bus-ar-invoices1.html"}
    finally:
        kb.close()


def test_from_settings_honours_each_calls_settings_over_one_client(tmp_path: Path) -> None:
    settings = KnowledgeSettings(qdrant_path=tmp_path / "qdrant")
    first = KnowledgeBase.from_settings(settings)
    second = KnowledgeBase.from_settings(
        settings.model_copy(update={"collection": "other", "keyword_weight": 0.0, "hybrid": True})
    )
    try:
        assert (first.collection, first.keyword_weight, first.hybrid) == ("kb", 0.03, False)
        assert (second.collection, second.keyword_weight, second.hybrid) == ("other", 0.0, True)
        assert second.knowledge is first.knowledge  # a local folder admits one store
        first.close()
        assert second.ping()  # the client stays open for its other user
    finally:
        second.close()
    assert not second.ping()


def test_wordllama_loads_from_its_wheel_without_opening_a_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a socket was opened")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    wordllama.cache_clear()
    index = KeywordIndex(
        [
            ("car", _passage("Selling a car or a house that is still financed.", "car.html")),
            ("tax", _passage("Sales tax tables hold the rates applied to invoices.", "tax.html")),
        ],
        "en",
        static=True,
    )
    nearest = index.static_search("I sold my old automobile", 2)
    assert [point_id for point_id, _ in nearest] == ["car", "tax"]
    assert nearest[0][1].score > nearest[1][1].score
    assert KeywordIndex([("car", _passage("car", "car.html"))], "en").static_search("car", 1) == []


def test_search_options_are_fixed_and_with_options_makes_a_view(
    knowledge_base: KnowledgeBase,
) -> None:
    with pytest.raises(AttributeError):
        knowledge_base.hybrid = True  # type: ignore[misc]
    dense = knowledge_base.with_options(keyword_weight=0.0, static_weight=0.0)
    assert (dense.keyword_weight, knowledge_base.keyword_weight) == (0.0, 0.03)
    assert dense.knowledge is knowledge_base.knowledge
    query = "export transactions to a CSV file"
    assert knowledge_base.search(query, 1)[0].score > dense.search(query, 1)[0].score


def test_wordllama_reads_its_float16_rows_from_its_file_and_embeds_as_in_float32() -> None:
    from wordllama.inference import WordLlamaInference

    model = wordllama()
    assert model.embedding.dtype == np.float16
    # A view of the file, not a copy in the process's memory.
    assert isinstance(model.embedding, np.memmap) and str(model.embedding.filename).endswith(
        "l2_supercat_256.safetensors"
    )
    in_float32 = WordLlamaInference(model.embedding, model.tokenizer)  # the library's copy
    texts = ["Reconcile a bank statement", "Rechnung stornieren", ""]
    assert np.array_equal(model.embed(texts), in_float32.embed(texts))
