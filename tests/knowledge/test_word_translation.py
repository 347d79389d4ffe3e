"""A question's words put into the documentation's vocabulary (knowledge/word_translation.py)
and scored by BM25, for a question in a language no page is written in."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from knowledge.embeddings import get_embedder
from knowledge.store import KnowledgeBase
from knowledge.word_translation import WordTranslator
from tests.knowledge.counting import CountingEmbedder

PAGES = {
    "depreciation.md": "# Depreciation\n\nDepreciation spreads the cost of fixed assets over "
    "the years you use them. Choose straight-line depreciation in the asset's settings.",
    "invoices.md": "# Invoices\n\nCreate an invoice from the Sales menu, then send the invoice "
    "to the customer by email. A sent invoice can no longer be edited.",
    "reconciliation.md": "# Reconciling a bank account\n\nReconcile each statement line with "
    "a transaction. A reconciled transaction is locked; reconcile transfers once.",
    "backup.md": "# Backups\n\nDownload a backup of the company file from the settings. To "
    "restore a backup, upload the backup file on the same page.",
}


def written_pages(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    for name, text in PAGES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def translator() -> WordTranslator:
    return WordTranslator(PAGES.values(), get_embedder("use"))


@pytest.mark.parametrize(
    ("question", "word"),
    [
        ("Wie funktioniert die Abschreibung?", "depreciation"),
        ("Как сделать резервную копию?", "backup"),
        ("Как сверить банковский счёт?", "reconcile"),
    ],
)
def test_a_questions_words_become_the_pages_words(
    translator: WordTranslator, question: str, word: str
) -> None:
    assert word in translator.translate(question).split()


def test_the_vocabulary_holds_words_seen_twice_and_nothing_near_gives_nothing(
    translator: WordTranslator,
) -> None:
    once = "Unique word seen once: zanzibar."
    assert len(WordTranslator([once], get_embedder("use"))) == 0
    assert WordTranslator([once], get_embedder("use")).translate("Zanzibar") == ""
    assert "email" not in translator.translate("E-Mail")  # "email" is on one page, once
    assert translator.translate("12345 !!") == ""  # no word of three letters


def test_a_changed_collection_embeds_only_its_new_words() -> None:
    """Rebuilt from the translator before the change, the vocabulary embeds the words it
    did not hold, and translates as one built from nothing."""
    before = CountingEmbedder("use")
    first = WordTranslator(PAGES.values(), before)
    added = "# Payroll\n\nRun payroll monthly; each payroll run pays every employee."
    after = CountingEmbedder("use")
    rebuilt = WordTranslator([*PAGES.values(), added], after, first)
    # The words seen twice only now ("each" was on one page once): no other is embedded.
    assert sorted(after.passages) == ["each", "payroll", "run"]
    assert len(rebuilt) == len(first) + 3
    fresh = WordTranslator([*PAGES.values(), added], get_embedder("use"))
    for question in ("Wie funktioniert die Lohnabrechnung?", "Как сделать резервную копию?"):
        assert rebuilt.translate(question) == fresh.translate(question)
    assert "payroll" in rebuilt.translate("Lohnabrechnung Gehaltsabrechnung").split()


@pytest.fixture(scope="module")
def english_pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeBase]:
    folder = written_pages(tmp_path_factory.mktemp("pages"))
    kb = KnowledgeBase.open_local(tmp_path_factory.mktemp("qdrant"), collection="pages")
    kb.ingest(folder)
    yield kb
    kb.close()


def test_a_question_in_another_language_gets_bm25_on_its_translated_words(
    english_pages: KnowledgeBase,
) -> None:
    """German over English pages: a page holding words the question's translate to is
    scored up to `keyword_weight` higher than without the translation (BM25 off), by its
    BM25 relative to the best; a page holding none of them is scored as before."""
    question = "Wie funktioniert die Abschreibung?"
    without = {
        p.source: p.score
        for p in english_pages.with_options(keyword_weight=0.0).search(question, 4)
    }
    raised = {p.source: p.score - without[p.source] for p in english_pages.search(question, 4)}
    weight = english_pages.keyword_weight
    assert weight > 0
    assert 0 < raised["depreciation.md"] <= weight + 1e-6
    assert raised["reconciliation.md"] == pytest.approx(0.0, abs=1e-9)
    assert max(raised.values()) == pytest.approx(weight)  # the best BM25 passage: 1.0


def test_a_question_in_the_pages_language_builds_no_translation(
    tmp_path: Path,
) -> None:
    """An English question over English pages is scored by BM25 on its own words: the
    vocabulary is never embedded for it."""
    folder = written_pages(tmp_path / "pages")
    kb = KnowledgeBase.open_local(tmp_path / "qdrant", collection="pages")
    try:
        kb.ingest(folder)
        found = kb.search("How does depreciation of assets work?", 4)
        assert found[0].source == "depreciation.md"
        assert not [key for key in kb.knowledge.payload_indexes if "translation" in key]
        kb.search("Wie funktioniert die Abschreibung?", 4)
        assert [key for key in kb.knowledge.payload_indexes if "translation" in key]
    finally:
        kb.close()


def test_the_warm_up_builds_what_a_question_in_another_language_needs(tmp_path: Path) -> None:
    """After `warm_up` (an English question), a German question over English pages finds
    the vocabulary and the USE matrix built, and builds no index of its own; with BM25
    off, no vocabulary is embedded; a collection that does not exist yet is no error."""
    folder = written_pages(tmp_path / "pages")
    kb = KnowledgeBase.open_local(tmp_path / "qdrant", collection="pages")
    try:
        kb.warm_up("How do I back up my file?", 4)
        assert not kb.knowledge.payload_indexes
        kb.ingest(folder)
        kb.with_options(keyword_weight=0.0).warm_up("How do I back up my file?", 4)
        assert not [key for key in kb.knowledge.payload_indexes if "translation" in key]
        kb.warm_up("How do I back up my file?", 4)
        built = dict(kb.knowledge.payload_indexes)
        assert [key for key in built if "translation" in key]
        kb.search("Wie funktioniert die Abschreibung?", 4)
        assert kb.knowledge.payload_indexes.keys() == built.keys()
        assert all(kb.knowledge.payload_indexes[key][2] is built[key][2] for key in built)
    finally:
        kb.close()


def test_a_search_after_an_ingest_embeds_only_the_words_it_added(tmp_path: Path) -> None:
    """The collection changed: its next question in another language rebuilds the
    vocabulary from the one before, so the words it already held are not embedded again."""
    folder = written_pages(tmp_path / "pages")
    kb = KnowledgeBase.open_local(tmp_path / "qdrant", collection="pages")
    try:
        counting = CountingEmbedder("use")
        kb.crosslingual = counting
        kb.ingest(folder)
        kb.search("Wie funktioniert die Abschreibung?", 4)
        assert {"backup", "depreciation"} <= set(counting.passages)  # the vocabulary
        (folder / "payroll.md").write_text(
            "# Payroll\n\nRun payroll monthly; each payroll run pays every employee.",
            encoding="utf-8",
        )
        kb.ingest(folder)
        counting.passages.clear()
        kb.search("Wie funktioniert die Abschreibung?", 4)
        words = {text for text in counting.passages if " " not in text and "\n" not in text}
        assert "payroll" in words
        assert not words & {"backup", "depreciation", "invoice", "reconcile"}
    finally:
        kb.close()
