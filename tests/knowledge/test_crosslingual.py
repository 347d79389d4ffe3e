"""The second, multilingual view of the passages (knowledge/crosslingual.py): stored in each
passage's payload at ingest, added to the dense score only for a question in a language
no page is written in."""

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from knowledge import crosslingual
from knowledge.chunking import truncate_to_tokens
from knowledge.embeddings import get_embedder
from knowledge.settings import DEFAULT_CROSSLINGUAL_WEIGHT
from knowledge.store import KnowledgeBase
from knowledge.types import Passage

SAMPLE = Path(__file__).resolve().parents[2] / "knowledge" / "sample_kb"


def _unit(vector: object) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    return array / np.linalg.norm(array)


def _use(text: str) -> np.ndarray:
    return _unit(get_embedder("use").embed_query(text))


@pytest.fixture(scope="module", params=["edge", "qdrant-local"])
def sample(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[KnowledgeBase]:
    """The sample knowledge base (English and Russian pages), ingested once into Qdrant
    Edge and once through qdrant-client (a server's code path, in its local mode)."""
    kb = KnowledgeBase.open_local(
        tmp_path_factory.mktemp("qdrant"), collection="sample", engine=request.param
    )
    kb.ingest(SAMPLE)
    yield kb
    kb.close()


def test_ingest_stores_each_passages_multilingual_vector_in_its_payload(
    sample: KnowledgeBase,
) -> None:
    points = list(sample.knowledge.scroll("sample", crosslingual.PAYLOAD_FIELDS))
    assert points and all(crosslingual.FIELD in payload for _, payload in points)
    _, payload = points[0]
    embedded = truncate_to_tokens(
        f"{payload['heading'] or payload['title']}\n{payload['text']}", 128
    )
    stored = _unit(crosslingual.decoded(payload[crosslingual.FIELD]))
    assert stored.shape == (512,)
    assert float(stored @ _use(embedded)) > 0.999  # float16 keeps the vector


def test_a_question_in_a_language_no_page_is_in_finds_its_page_with_the_second_view(
    sample: KnowledgeBase,
) -> None:
    """German questions over English and Russian pages (the sample's development set):
    e5 alone does not offer the answering page among the first three, e5 + USE does."""
    for question, page in [
        (
            "Ich habe einen großen Export angestoßen und einen Download-Link per Mail "
            "bekommen. Wie lange ist der gültig?",
            "en/reports.md",
        ),
        (
            "Ich habe Geld vom Geschäftskonto aufs Tagesgeldkonto überwiesen. Wie gleiche "
            "ich das ab, ohne es doppelt zu buchen?",
            "en/bank-reconciliation.md",
        ),
    ]:
        e5_alone = sample.with_options(crosslingual_weight=0.0).search(question, 4)
        fused = sample.search(question, 4)
        assert page not in [p.source for p in e5_alone][:3], question
        assert page in [p.source for p in fused][:3], question


def test_the_second_view_adds_uses_cosine_to_the_dense_score(sample: KnowledgeBase) -> None:
    question = "Wie lange ist der Download-Link eines Exports gültig?"
    dense = {
        (p.source, p.heading): p
        for p in sample.with_options(crosslingual_weight=0.0).search(question, 12)
    }
    query = _use(question)
    checked = 0
    # BM25 off: it would add the question's words put into the pages' (test_word_translation).
    for passage in sample.with_options(keyword_weight=0.0).search(question, 12):
        before = dense.get((passage.source, passage.heading))
        if before is None:
            continue
        embedded = truncate_to_tokens(f"{passage.heading or passage.title}\n{passage.text}", 128)
        cosine = float(_use(embedded) @ query)
        assert passage.similarity == before.similarity  # thresholds still see e5's cosine
        if passage.score - before.score > DEFAULT_CROSSLINGUAL_WEIGHT * cosine - 1e-3:
            checked += 1  # among USE's nearest: its own cosine (else its floor, lower)
        assert passage.score <= before.score + DEFAULT_CROSSLINGUAL_WEIGHT * cosine + 1e-3
    assert checked >= 3


@pytest.mark.parametrize(
    "question",
    [
        "How long is the download link of an export valid?",  # English pages
        "Как долго действует ссылка на экспорт?",  # Russian pages
    ],
)
def test_a_question_in_a_language_of_the_pages_is_searched_as_before(
    sample: KnowledgeBase, question: str
) -> None:
    assert sample.search(question, 4) == sample.with_options(crosslingual_weight=0.0).search(
        question, 4
    )


def test_passages_ingested_before_the_second_view_are_searched_by_e5_alone(
    tmp_path: Path,
) -> None:
    kb = KnowledgeBase.open_local(tmp_path / "qdrant", collection="old")
    try:
        kb.ingest(SAMPLE / "en")
        # As an ingest before the field existed wrote them: no multilingual vector.
        without = [
            (point_id, {k: v for k, v in payload.items() if k != crosslingual.FIELD})
            for point_id, payload in kb.knowledge.scroll("old", crosslingual.PAYLOAD_FIELDS)
        ]
        index = crosslingual.CrosslingualIndex(without, "answers")
        assert len(index) == 0 and index.page_languages == {"en"}
        assert index.search(_use("Wie lange ist der Link gültig?"), ["en"], 5) == {}
    finally:
        kb.close()


def test_the_index_searches_the_languages_asked_and_team_answers_in_any() -> None:
    def point(point_id: str, text: str, language: str, root: str) -> tuple[str, dict[str, object]]:
        vector = crosslingual.encoded(np.asarray([_use(text)]))[0]
        payload: dict[str, object] = {
            "text": text,
            "title": text,
            "heading": "",
            "source": f"{point_id}.md",
        }
        return point_id, payload | {"language": language, "root": root, crosslingual.FIELD: vector}

    index = crosslingual.CrosslingualIndex(
        [
            point("invoice", "How to create an invoice", "en", "/docs"),
            point("rechnung", "Eine Rechnung erstellen", "de", "/docs"),
            point("answer", "Счёт можно создать в разделе Продажи", "ru", "answers"),
        ],
        "answers",
    )
    assert index.page_languages == {"en", "de"}  # a team answer is no page
    hits = index.search(_use("Как создать счёт?"), ["en"], 5)
    assert set(hits) == {"invoice", "answer"}
    assert isinstance(hits["invoice"].passage, Passage)
    nearest_first = sorted(hits, key=lambda point_id: -hits[point_id].score)
    assert list(hits) == nearest_first
    assert list(index.search(_use("Как создать счёт?"), ["en"], 1)) == nearest_first[:1]
    every = index.search(_use("Как создать счёт?"), ["de", "en"], 5)
    assert set(every) == {"invoice", "rechnung", "answer"} and len(index) == 3


def test_hybrid_search_keeps_its_fused_ranks(sample: KnowledgeBase) -> None:
    """Qdrant's hybrid scores are reciprocal ranks: a cosine added to them would outweigh
    them, so a hybrid search takes no second view. (Compared by page and score: two
    sections of a page may tie on a rank and come in either order.)"""
    question = "Wie lange ist der Download-Link eines Exports gültig?"
    hybrid = sample.with_options(hybrid=True)
    ranks = [(p.source, p.score) for p in hybrid.search(question, 4)]
    assert ranks == [
        (p.source, p.score)
        for p in hybrid.with_options(crosslingual_weight=0.0).search(question, 4)
    ]


def test_concurrent_searches_that_need_an_index_wait_for_its_one_build(
    sample: KnowledgeBase,
) -> None:
    """Four searches needing an in-process index nobody has built yet (the first questions
    after a start or an ingest): one builds it, the others wait and use it."""
    builds: list[float] = []

    def build() -> object:
        builds.append(time.monotonic())
        time.sleep(0.2)  # long enough for the other searches to ask for it meanwhile
        return object()

    with ThreadPoolExecutor(4) as pool:
        indexes = list(pool.map(lambda _: sample._in_process(("sample", "built"), build), range(4)))
    assert len(builds) == 1
    assert all(index is indexes[0] for index in indexes)
