"""The knowledge base's search: passages out of a Qdrant collection.

Qdrant Edge on a folder on disk by default, a Qdrant server by URL and API key otherwise:
the same code over `knowledge.client.KnowledgeClient`. A search uses the dense vector, or
(`hybrid`) fuses it with the BM25 sparse vector by reciprocal rank fusion in Qdrant. A
query is also scored in this process by BM25 and, in English, WordLlama
(`knowledge.keywords`) over the passages in its own language (the documentation's,
`language`, or another the collection holds pages in), and the scores are added
(`keyword_weight`, `static_weight`); a query in a language no page is written in is scored
by a multilingual embedder instead (`knowledge.crosslingual`, `crosslingual_weight`), and
by BM25 over the documentation's pages with its words put into theirs
(`knowledge.word_translation`).
Ingestion is `knowledge.ingest`, counting `knowledge.stats`, the shared client
`knowledge.client`; a `KnowledgeBase` offers all three over one client. One module: the
search's signals are fused in one place.
"""

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np

from knowledge import crosslingual, sparse, stores, team_answers
from knowledge.calibration.collection import (
    CollectionCalibration,
    calibrate_collection,
    drop_calibration,
    load_calibration,
    store_calibration,
)
from knowledge.client import DENSE, KnowledgeClient, ScoredPoint, VectorQuery
from knowledge.embeddings import DEFAULT_EMBEDDER, Embedder, get_embedder
from knowledge.graph_cache import GraphCache, default_cache_folder
from knowledge.ingest import CALIBRATING, Ingester, IngestReport, ProgressCallback, Reading
from knowledge.ingest import discover_files as discover_files  # evals imports it from here
from knowledge.keywords import KeywordHit, KeywordIndex, indexed_text, query_language
from knowledge.loaders import UNKNOWN_LANGUAGE
from knowledge.settings import (
    DEFAULT_CROSSLINGUAL_WEIGHT,
    DEFAULT_KEYWORD_WEIGHT,
    DEFAULT_STATIC_WEIGHT,
    KnowledgeSettings,
)
from knowledge.sources import Removed, replace_sample
from knowledge.sources import remove as remove_passages
from knowledge.stats import KnowledgeStats, collection_stats
from knowledge.types import PASSAGE_FIELDS, Passage, passage_of
from knowledge.word_translation import WordTranslator

IndexT = TypeVar("IndexT")

# A search fetches this many candidates per passage it returns, to spread them over pages.
CANDIDATES_PER_PASSAGE = 8
# For a query in a language no page is written in (chosen on the development and
# first-round question sets: docs/knowledge.md#search).
CROSSLINGUAL_CANDIDATES_PER_PASSAGE = 32
# How long a keyword index is trusted before the collection's size is checked again (another
# process sharing a Qdrant server may have ingested meanwhile).
KEYWORD_INDEX_CHECK_SECONDS = 30.0


@dataclass(frozen=True)
class SearchOptions:
    """How a knowledge base searches; fixed for its life (`with_options` makes another)."""

    hybrid: bool = False  # Qdrant's RRF of dense and sparse BM25 vectors
    language: str = "en"  # the documentation's: searches take its pages beside the query's
    keyword_weight: float = DEFAULT_KEYWORD_WEIGHT
    static_weight: float = DEFAULT_STATIC_WEIGHT
    crosslingual_weight: float = DEFAULT_CROSSLINGUAL_WEIGHT
    passages_per_page: int = 1
    # Let Qdrant group candidates by page (`query_points_groups`): a server's. Qdrant Edge
    # has no grouping (and qdrant-client's local mode scores and copies every point for
    # it), so there the page spread is made in Python. Dense results are the same; the
    # fused ones differ a little, as BM25 then meets one passage per page instead of the
    # top points.
    group_in_qdrant: bool = False


class KnowledgeBase:
    """Satisfies `knowledge.types.Retriever`: a collection's search with `SearchOptions`
    fixed when it is made, and its ingestion and stats, over a shared `KnowledgeClient`.
    `over` uses a client someone else holds (the runtime's); `from_settings` and
    `open_local` hold one of their own, released by `close`."""

    def __init__(
        self,
        knowledge: KnowledgeClient,
        *,
        collection: str = "kb",
        embedder: Embedder | None = None,
        options: SearchOptions | None = None,
        chunk_tokens: int = 350,
        min_chunk_tokens: int = 30,
        embed_tokens: int = 128,
        owns_client: bool = False,
        cache_folder: Path | None = None,
    ) -> None:
        self.knowledge = knowledge
        self.collection = collection
        self.embedder = embedder or get_embedder(DEFAULT_EMBEDDER)
        self.options = options or SearchOptions(group_in_qdrant=knowledge.groups_in_engine)
        # The multilingual embedder: ingest stores its vectors, a search across languages
        # embeds the query with it (`knowledge.crosslingual`).
        self.crosslingual = crosslingual.second_embedder(self.embedder)
        self.ingester = Ingester(
            knowledge,
            self.embedder,
            chunk_tokens,
            min_chunk_tokens,
            embed_tokens,
            self.crosslingual,
        )
        self._owns_client = owns_client
        # Where the calibration bank's vectors are kept (the embedder's cache folder).
        self.cache_folder = cache_folder or default_cache_folder()
        self._calibrations: dict[str, tuple[float, CollectionCalibration | None]] = {}

    @classmethod
    def open_local(
        cls,
        path: Path,
        *,
        collection: str = "kb",
        embedder: Embedder | None = None,
        engine: str = "edge",
        **options: Any,
    ) -> "KnowledgeBase":
        """A knowledge base with a store of its own on a local folder (`engine`: see
        `stores.open_local`); `options` are `SearchOptions` fields and the
        chunking settings."""
        chunking = {
            name: options.pop(name)
            for name in ("chunk_tokens", "min_chunk_tokens", "embed_tokens")
            if name in options
        }
        return cls(
            stores.open_local(path, engine),
            collection=collection,
            embedder=embedder,
            options=SearchOptions(**options),
            owns_client=True,
            **chunking,
        )

    @classmethod
    def over(cls, knowledge: KnowledgeClient, settings: KnowledgeSettings) -> "KnowledgeBase":
        """A knowledge base with these settings over a client the caller holds."""
        return cls(
            knowledge,
            collection=settings.collection,
            embedder=get_embedder(settings.embedder, settings.model_cache_dir),
            options=SearchOptions(
                hybrid=settings.hybrid,
                language=settings.language,
                keyword_weight=settings.keyword_weight,
                static_weight=settings.static_weight,
                crosslingual_weight=settings.crosslingual_weight,
                passages_per_page=settings.passages_per_page,
                group_in_qdrant=knowledge.groups_in_engine,
            ),
            chunk_tokens=settings.chunk_tokens,
            min_chunk_tokens=settings.min_chunk_tokens,
            embed_tokens=settings.embed_tokens,
            cache_folder=settings.model_cache_dir,
        )

    @classmethod
    def from_settings(cls, settings: KnowledgeSettings) -> "KnowledgeBase":
        """A knowledge base with these settings holding a use of the process's client for
        their location (opened on first use)."""
        kb = cls.over(stores.acquire(settings), settings)
        kb._owns_client = True
        return kb

    @property
    def location(self) -> str:
        return self.knowledge.location

    @property
    def hybrid(self) -> bool:
        return self.options.hybrid

    @property
    def language(self) -> str:
        return self.options.language

    @property
    def keyword_weight(self) -> float:
        return self.options.keyword_weight

    @property
    def static_weight(self) -> float:
        return self.options.static_weight

    @property
    def passages_per_page(self) -> int:
        return self.options.passages_per_page

    def with_options(self, **changes: Any) -> "KnowledgeBase":
        """This knowledge base searching with other `SearchOptions`: same client, same
        collection and caches. A view: close this one, not it."""
        return KnowledgeBase(
            self.knowledge,
            collection=self.collection,
            embedder=self.embedder,
            options=replace(self.options, **changes),
            chunk_tokens=self.ingester.chunk_tokens,
            min_chunk_tokens=self.ingester.min_chunk_tokens,
            embed_tokens=self.ingester.embed_tokens,
            cache_folder=self.cache_folder,
        )

    def close(self) -> None:
        """Release this knowledge base's use of the client, if it holds one."""
        if self._owns_client:
            self._owns_client = False
            self.knowledge.release()

    def ping(self) -> bool:
        return self.knowledge.ping()

    def ingest(
        self,
        path: Path,
        collection: str | None = None,
        progress: ProgressCallback | None = None,
        confined_to: Sequence[Path] = (),
    ) -> IngestReport:
        """Mirror a folder (or add one file) into a collection (`knowledge.ingest`), then
        calibrate the collection when its passages changed or it has no calibration yet
        (`knowledge.calibration.collection`)."""
        name = collection or self.collection
        return self._calibrated(self.ingester.ingest(path, name, progress, confined_to), progress)

    def ingest_documents(
        self,
        root: str,
        readings: Iterable[Reading],
        collection: str | None = None,
        progress: ProgressCallback | None = None,
        *,
        complete: bool,
    ) -> IngestReport:
        """Write documents read from `root` (e.g. a website's pages, `knowledge.sync`) into a
        collection (`Ingester.ingest_documents`), then calibrate it as `ingest` does."""
        name = collection or self.collection
        report = self.ingester.ingest_documents(name, root, readings, progress, complete=complete)
        return self._calibrated(report, progress)

    def _calibrated(self, report: IngestReport, progress: ProgressCallback | None) -> IngestReport:
        """Calibrate the report's collection when its passages changed or it has no
        calibration yet (`knowledge.calibration.collection`)."""
        if report.changed or load_calibration(self.knowledge, report.collection) is None:
            if progress:
                progress(CALIBRATING)
            started = time.perf_counter()
            self.calibrate(report.collection)
            report.calibration_seconds = round(time.perf_counter() - started, 3)
            report.seconds = round(report.seconds + report.calibration_seconds, 3)
        return report

    def remove(
        self, collection: str | None = None, *, root: str | None = None, source: str | None = None
    ) -> Removed:
        """Take an ingested folder, a document or everything out of a collection
        (`knowledge.sources.remove`), and calibrate what is left."""
        name = collection or self.collection
        removed = remove_passages(self.knowledge, name, root=root, source=source)
        if removed.chunks:
            self.calibrate(name)
        return removed

    def replace_sample(
        self, sample: Path, ingesting: Path | None, collection: str | None = None
    ) -> Removed | None:
        """Take the sample knowledge base out before the user's own folder (or, None,
        website) goes in (`knowledge.sources.replace_sample`)."""
        return replace_sample(self.knowledge, collection or self.collection, sample, ingesting)

    def calibrate(self, collection: str | None = None) -> CollectionCalibration | None:
        """Make and store a collection's calibration from its own passages; None (and the
        stored one dropped) for an empty collection."""
        name = collection or self.collection
        self._calibrations.pop(name, None)
        passages = self.knowledge.count(name) if self.knowledge.collection_exists(name) else 0
        if not passages:
            drop_calibration(self.knowledge, name)
            return None

        def best(vector: Any) -> float:
            hits = self.knowledge.search(
                name, VectorQuery(dense=[float(x) for x in vector], limit=1)
            )
            return float(hits[0].score) if hits else 0.0

        calibration = calibrate_collection(
            self.embedder, best, passages, GraphCache(self.cache_folder)
        )
        store_calibration(self.knowledge, name, calibration)
        return calibration

    def calibration(self, collection: str | None = None) -> CollectionCalibration | None:
        """The calibration stored with a collection, read again every few seconds (another
        process may have ingested meanwhile)."""
        name = collection or self.collection
        now = time.monotonic()
        cached = self._calibrations.get(name)
        if cached and now - cached[0] < KEYWORD_INDEX_CHECK_SECONDS:
            return cached[1]
        found = load_calibration(self.knowledge, name)
        self._calibrations[name] = (now, found)
        return found

    def stats(self, collection: str | None = None) -> KnowledgeStats:
        return collection_stats(
            self.knowledge,
            collection or self.collection,
            embedder=self.embedder.name,
            hybrid=self.hybrid,
        )

    # --- search -----------------------------------------------------------------------

    def search(
        self, query: str, k: int, *, collection: str | None = None, language: str | None = None
    ) -> list[Passage]:
        if not query.strip():
            return []
        return self.search_by_vector(
            query, self.embedder.embed_query(query), k, collection=collection, language=language
        )

    def warm_up(self, query: str, k: int) -> None:
        """One search for `query`, which builds the collection's BM25 index in this process,
        and, when the second view is searched, what a question in a language no page is
        written in needs: USE, the matrix of the passages' USE vectors and the word
        translation's vocabulary (for the GnuCash manuals about 2 s of CPU and 60 MB),
        which the first such question would otherwise wait for."""
        self.search(query, k)
        if not self._second_view_searched or not self.knowledge.collection_exists(self.collection):
            return
        assert self.crosslingual is not None  # `_second_view_searched` checked it
        self._crosslingual_index(self.collection)
        if self.keyword_weight > 0:
            index = self._keyword_index(self.collection, self.language)
            self._word_translator(self.collection, index, self.crosslingual)

    def search_by_vector(
        self,
        query: str,
        dense_vector: Any,
        k: int,
        *,
        collection: str | None = None,
        language: str | None = None,
    ) -> list[Passage]:
        """The Qdrant part of `search`, for a query already embedded. At most
        `passages_per_page` passages come from one page, so that k passages cover k pages
        rather than one page's neighbouring sections."""
        name = collection or self.collection
        dense = [float(x) for x in dense_vector]
        # Unfiltered, a search takes passages in the query's language and the
        # documentation's: an English question is not answered from the German manual, a
        # German one may be. A team answer is taken in any language (its nearness across
        # languages is the question's own, knowledge/evidence.py).
        asked = query_language(query, self.language)
        languages = [language] if language else sorted({asked, self.language, UNKNOWN_LANGUAGE})
        if not self.knowledge.collection_exists(name):
            return []
        across = self._across_languages(name, asked)
        # Deep enough to find k distinct pages; across languages, for the passages the other
        # signals raise to be among them with their own cosine.
        depth = (CROSSLINGUAL_CANDIDATES_PER_PASSAGE if across else CANDIDATES_PER_PASSAGE) * k
        points = self._points(name, query, dense, depth, languages)
        candidates = [_passage(point, dense if self.hybrid else None) for point in points]
        ids = [str(point.id) for point in points]
        if across:
            candidates = self._with_crosslingual(name, query, languages, ids, candidates, depth)
        elif self._scores_words(asked, language):
            candidates = self._with_keywords(name, query, asked, ids, candidates, depth)
        return _spread_over_pages(candidates, k, self.passages_per_page)

    def _points(
        self, name: str, query: str, dense: list[float], depth: int, languages: list[str]
    ) -> list[ScoredPoint]:
        """The best `depth` points in `languages` (a payload filter in the engine), at most
        `passages_per_page` a page when Qdrant groups them (`group_in_qdrant`)."""
        return self.knowledge.search(
            name,
            VectorQuery(
                dense=dense,
                limit=depth,
                sparse=sparse.query_vector(query) if self.hybrid else None,
                any_of={"language": languages, "root": team_answers.ROOT},
                with_dense=self.hybrid,
                group_by="source" if self.options.group_in_qdrant else None,
                group_size=self.passages_per_page,
                payload=PASSAGE_FIELDS,  # not the multilingual vector (1.4 kB a point)
            ),
        )

    def _across_languages(self, name: str, asked: str) -> bool:
        """Whether a query in language `asked` is in one none of the collection's pages is
        written in (and the second view of the passages is on). A query in the
        documentation's language is taken to have pages in it, without building the index
        to check. Not in hybrid mode: its scores are fused ranks, to which a cosine cannot
        be added."""
        if not self._second_view_searched or asked == self.language:
            return False
        return asked not in self._crosslingual_index(name).page_languages

    @property
    def _second_view_searched(self) -> bool:
        return (
            self.crosslingual is not None
            and self.options.crosslingual_weight > 0
            and not self.hybrid
        )

    def _with_crosslingual(
        self,
        name: str,
        query: str,
        languages: list[str],
        ids: list[str],
        dense: list[Passage],
        depth: int,
    ) -> list[Passage]:
        """Dense candidates, USE's nearest and BM25's best for the query's words put into
        the documentation's vocabulary, scored cosine + weight × USE's cosine (a passage USE
        did not find: the lowest of its nearest) + `keyword_weight` × relative BM25."""
        assert self.crosslingual is not None  # `_across_languages` checked it
        vector = np.asarray(self.crosslingual.embed_query(query), dtype=np.float32)
        nearest = self._crosslingual_index(name).search(vector, languages, depth)
        words = self._translated_keywords(name, query, depth, self.crosslingual)
        if not nearest and not words:
            return dense
        floor = min((hit.score for hit in nearest.values()), default=0.0)
        weight = self.options.crosslingual_weight

        def extra(point_id: str) -> float:
            near = nearest[point_id].score if point_id in nearest else floor
            keyword = words[point_id].score if point_id in words else 0.0
            return weight * near + self.keyword_weight * keyword

        return _fused(ids, dense, nearest | words, extra)

    def _translated_keywords(
        self, name: str, query: str, depth: int, embedder: Embedder
    ) -> dict[str, KeywordHit]:
        """BM25 over the documentation's pages, of the query's words put into their
        vocabulary (`knowledge.word_translation`, its words embedded with `embedder`); none
        when BM25 is off."""
        if self.keyword_weight <= 0:
            return {}
        index = self._keyword_index(name, self.language)
        translated = self._word_translator(name, index, embedder).translate(query)
        return dict(index.search(translated, depth)) if translated else {}

    def _word_translator(
        self, name: str, index: KeywordIndex, embedder: Embedder
    ) -> WordTranslator:
        """The in-process vocabulary of `index`'s passages, embedded with `embedder`; when
        the collection changes, only the words new to it are embedded."""
        key = (name, "translation", self.language)

        def build() -> WordTranslator:
            previous = self.knowledge.vocabularies.get(key)
            translator = WordTranslator(map(indexed_text, index.passages), embedder, previous)
            self.knowledge.vocabularies[key] = translator
            return translator

        return self._in_process(key, build)

    def _scores_words(self, asked: str, language: str | None) -> bool:
        """Whether BM25 (and WordLlama) score the query, over the passages in its own
        language `asked`. They know the words of one language: they help a query in it and
        hurt one in another (docs/knowledge.md), so a query is scored against the pages
        written in its language, the documentation's or another the collection also
        holds (a German question, the German manual); a search filtered to another
        language: dense only."""
        if language not in (None, asked):
            return False
        return self.keyword_weight > 0 or self._uses_static(asked)

    def _uses_static(self, language: str) -> bool:
        return self.static_weight > 0 and language == "en"  # WordLlama is English

    def _with_keywords(
        self,
        name: str,
        query: str,
        language: str,
        ids: list[str],
        dense: list[Passage],
        depth: int,
    ) -> list[Passage]:
        """Dense candidates and the best of BM25 and WordLlama, scored cosine + weight ×
        relative BM25 + weight × WordLlama's z-score."""
        index = self._keyword_index(name, language)
        keyword = dict(index.search(query, depth)) if self.keyword_weight > 0 else {}
        static = dict(index.static_search(query, depth)) if self._uses_static(language) else {}
        if not keyword and not static:
            return dense

        def extra(point_id: str) -> float:
            words = keyword[point_id].score if point_id in keyword else 0.0
            nearness = static[point_id].score if point_id in static else 0.0
            return self.keyword_weight * words + self.static_weight * nearness

        return _fused(ids, dense, keyword | static, extra)

    def _keyword_index(self, name: str, language: str) -> KeywordIndex:
        """The in-process index of the collection's passages in `language`."""
        static = self._uses_static(language)
        return self._in_process(
            (name, language, static),
            lambda: KeywordIndex(
                (
                    (str(point_id), passage_of(payload))
                    for point_id, payload in self.knowledge.scroll(name, PASSAGE_FIELDS)
                    if payload.get("language") == language
                ),
                language,
                static=static,
            ),
        )

    def _crosslingual_index(self, name: str) -> crosslingual.CrosslingualIndex:
        """The in-process matrix of the collection's USE vectors."""
        return self._in_process(
            (name, crosslingual.FIELD),
            lambda: crosslingual.CrosslingualIndex(
                self.knowledge.scroll(name, crosslingual.PAYLOAD_FIELDS), team_answers.ROOT
            ),
        )

    def _in_process(self, key: tuple[Any, ...], build: Callable[[], IndexT]) -> IndexT:
        """An index built in this process from the collection's payloads (`key` names it,
        the collection first): built on first use, rebuilt when the collection's size
        changes (checked every few seconds); searches that need it meanwhile wait for
        that one build rather than each build it."""
        with self.knowledge.building(key):
            now = time.monotonic()
            cached = self.knowledge.payload_indexes.get(key)
            if cached and now - cached[1] < KEYWORD_INDEX_CHECK_SECONDS:
                return cast(IndexT, cached[2])
            points = self.knowledge.count(key[0])
            if cached and cached[0] == points:
                self.knowledge.payload_indexes[key] = (points, now, cached[2])
                return cast(IndexT, cached[2])
            index = build()
            self.knowledge.payload_indexes[key] = (points, now, index)
            return index


def _fused(
    ids: list[str],
    dense: list[Passage],
    found: dict[str, KeywordHit],
    extra: Callable[[str], float],
) -> list[Passage]:
    """The dense candidates (`ids` their point ids) and the passages another signal
    `found`, each scored its cosine + `extra(point id)`, best first. A passage the dense
    search did not find gets the lowest score among its candidates, and no similarity
    (0.0): what another signal alone found never passes a relevance threshold on a
    made-up number."""
    floor = min((passage.score for passage in dense), default=0.0)
    scored = dict(zip(ids, dense, strict=True))
    for point_id, hit in found.items():
        scored.setdefault(point_id, replace(hit.passage, score=floor, similarity=0.0))
    fused = [
        replace(passage, score=passage.score + extra(point_id))
        for point_id, passage in scored.items()
    ]
    return sorted(fused, key=lambda passage: passage.score, reverse=True)


def _spread_over_pages(candidates: list[Passage], k: int, per_page: int) -> list[Passage]:
    """The best k candidates with at most `per_page` from one source; if there are too few
    pages, the best of the rest fill up to k."""
    taken: list[Passage] = []
    held_back: list[Passage] = []
    per_source: Counter[str] = Counter()
    for passage in candidates:
        per_source[passage.source] += 1
        (taken if per_source[passage.source] <= per_page else held_back).append(passage)
    chosen = taken[:k] + held_back[: max(0, k - len(taken))]
    return sorted(chosen, key=lambda passage: passage.score, reverse=True)


def _passage(point: ScoredPoint, dense: list[float] | None = None) -> Passage:
    """The point as a passage; `dense`: the query's dense vector, when the point's score
    is a fused rank (hybrid) and its similarity must come from its own vector."""
    score = float(point.score)
    similarity = score
    if dense is not None:
        vectors = point.vector if isinstance(point.vector, dict) else {}
        vector = vectors.get(DENSE)
        similarity = float(np.dot(vector, dense)) if isinstance(vector, list) else 0.0
    return replace(passage_of(point.payload or {}), score=score, similarity=similarity)
