"""The knowledge base: documents in, passages out, stored in Qdrant.

Local mode (a folder on disk) by default, a Qdrant server by URL and API key otherwise:
the same code. Every chunk is a point with a dense vector (the embedder) and a BM25 sparse
vector; a search uses the dense one, or (`hybrid`) fuses both with reciprocal rank fusion
in Qdrant. A query in the documentation's language (`language`) is also scored in this
process by BM25 and, for English, WordLlama (`knowledge.keywords`), and the scores are
added (`keyword_weight`, `static_weight`).

Ingestion mirrors a folder: each file's fingerprint (its bytes, the embedder and the
chunking settings) is stored with its chunks, so re-ingesting skips unchanged files,
replaces the chunks of changed ones and deletes those of files that are gone. Only chunks
ingested from the same folder are compared, so several folders can share a collection.
"""

import contextlib
import copy
import hashlib
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from qdrant_client import QdrantClient, models

from app.settings import KnowledgeSettings
from knowledge import sparse
from knowledge.chunking import Chunk, chunk_document, truncate_to_tokens
from knowledge.embeddings import DEFAULT_EMBEDDER, Embedder, get_embedder
from knowledge.keywords import KeywordIndex, query_language
from knowledge.loaders import (
    SUPPORTED_SUFFIXES,
    UNKNOWN_LANGUAGE,
    Document,
    LoadError,
    load_document,
)
from knowledge.types import Passage

DENSE = "dense"
SPARSE = "bm25"
# Bump when loading or chunking changes, so that re-ingesting rebuilds every document.
INDEX_VERSION = "1"
EMBED_BATCH = 64
# A search fetches this many candidates per passage it returns, to spread them over pages.
CANDIDATES_PER_PASSAGE = 8
_SCROLL_PAGE = 1000
_POINT_NAMESPACE = uuid.UUID("0f1d6c52-5e4b-4c6a-9d43-6b8f9e0a7a11")
_INDEXED_FIELDS = ("source", "language", "root")
# How long a keyword index is trusted before the collection's size is checked again (another
# process sharing a Qdrant server may have ingested meanwhile).
KEYWORD_INDEX_CHECK_SECONDS = 30.0
# Fusion: cosine + keyword_weight × BM25 relative to the query's best passage. e5's cosines
# of the top passages lie within ~0.1 of each other, so 0.03 is "BM25 counts 30% of that".
DEFAULT_KEYWORD_WEIGHT = 0.03
# WordLlama adds static_weight × (its cosine's z-score over the passages): 0.005 makes two
# standard deviations worth a third of BM25's best. Chosen on the dev conversations.
DEFAULT_STATIC_WEIGHT = 0.005
# An unfiltered search fetches this many times its candidates, then keeps those in the
# query's language and the documentation's (see `search_by_vector`).
LANGUAGE_DEPTH_FACTOR = 2

ProgressCallback = Callable[[str], None]  # called once per file with its source path


class StoreInUse(RuntimeError):
    """A local Qdrant folder is open in another process: local mode allows one client."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"the local Qdrant store {path} is open in another process")
        self.path = path


class EmbedderMismatch(ValueError):
    """A collection's vectors were made by another embedder (their size differs)."""


@dataclass
class IngestReport:
    collection: str
    documents_added: int = 0
    documents_updated: int = 0
    documents_deleted: int = 0
    documents_unchanged: int = 0
    chunks_added: int = 0
    chunks_deleted: int = 0
    chunks_unchanged: int = 0
    skipped: dict[str, str] = field(default_factory=dict)  # pages with no text, e.g. a TOC
    errors: dict[str, str] = field(default_factory=dict)  # source -> what is wrong with it
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return bool(self.documents_added or self.documents_updated or self.documents_deleted)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class KnowledgeStats:
    collection: str
    location: str
    embedder: str
    hybrid: bool
    documents: int
    chunks: int
    chunks_by_language: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _PendingDocument:
    document: Document
    fingerprint: str
    chunks: list[Chunk]
    replaces: int  # chunks of the previous version to delete (0 for a new document)


@dataclass(frozen=True)
class SearchOptions:
    """How a knowledge base searches; fixed for its life (`with_options` makes another)."""

    hybrid: bool = False  # Qdrant's RRF of dense and sparse BM25 vectors
    language: str = "en"  # the documentation's: BM25 and WordLlama score queries in it
    keyword_weight: float = DEFAULT_KEYWORD_WEIGHT
    static_weight: float = DEFAULT_STATIC_WEIGHT
    passages_per_page: int = 1


@dataclass
class _SharedClient:
    """One Qdrant client per location and process (a local folder admits one), shared by
    every `KnowledgeBase` opened on it, with what they cache about its collections."""

    client: QdrantClient
    lock: contextlib.AbstractContextManager[Any]
    users: int = 0
    # (collection, language, with WordLlama) -> (points when built, time of the last check,
    # index)
    keyword_indexes: dict[tuple[str, str, bool], tuple[int, float, KeywordIndex]] = field(
        default_factory=dict
    )


class KnowledgeBase:
    """Satisfies `knowledge.types.Retriever`: a collection's search options (fixed when it
    is made), ingestion and stats over a Qdrant client. `from_settings` gives each call a
    knowledge base with that call's settings over the process's one client for the
    location; `close` releases it (the client closes with its last user)."""

    def __init__(
        self,
        client: QdrantClient,
        *,
        collection: str = "kb",
        location: str = "",
        embedder: Embedder | None = None,
        hybrid: bool = False,
        language: str = "en",
        keyword_weight: float = DEFAULT_KEYWORD_WEIGHT,
        static_weight: float = DEFAULT_STATIC_WEIGHT,
        chunk_tokens: int = 350,
        min_chunk_tokens: int = 100,
        embed_tokens: int = 128,
        passages_per_page: int = 1,
        shared: _SharedClient | None = None,
    ) -> None:
        self.client = client
        self.collection = collection
        self.location = location
        self.embedder = embedder or get_embedder(DEFAULT_EMBEDDER)
        self.options = SearchOptions(
            hybrid, language, keyword_weight, static_weight, passages_per_page
        )
        self.chunk_tokens = chunk_tokens
        self.min_chunk_tokens = min_chunk_tokens
        self.embed_tokens = embed_tokens
        self._local = location.startswith("local:")
        # The local-mode client is not thread-safe; a server client is.
        self._shared = shared or _SharedClient(
            client, threading.RLock() if self._local else contextlib.nullcontext()
        )
        self._shared.users += 1
        self._lock = self._shared.lock

    @classmethod
    def open_local(cls, path: Path, **options: Any) -> "KnowledgeBase":
        path = path.resolve()
        path.mkdir(parents=True, exist_ok=True)
        return cls(_open_local_client(path), location=f"local:{path}", **options)

    @classmethod
    def from_settings(cls, settings: KnowledgeSettings) -> "KnowledgeBase":
        """A knowledge base with these settings over the process's client for their
        location (opened on first use)."""
        location = settings.qdrant_url or f"local:{settings.qdrant_path.resolve()}"
        with _clients_lock:
            shared = _clients.get(location)
            if shared is None:
                if settings.qdrant_url:
                    api_key = settings.qdrant_api_key
                    client = QdrantClient(
                        url=settings.qdrant_url,
                        api_key=api_key.get_secret_value() if api_key else None,
                    )
                    shared = _SharedClient(client, contextlib.nullcontext())
                else:
                    path = settings.qdrant_path.resolve()
                    path.mkdir(parents=True, exist_ok=True)
                    shared = _SharedClient(_open_local_client(path), threading.RLock())
                _clients[location] = shared
            return cls(
                shared.client,
                location=location,
                shared=shared,
                collection=settings.collection,
                embedder=get_embedder(settings.embedder),
                hybrid=settings.hybrid,
                language=settings.language,
                keyword_weight=settings.keyword_weight,
                static_weight=settings.static_weight,
                chunk_tokens=settings.chunk_tokens,
                min_chunk_tokens=settings.min_chunk_tokens,
                embed_tokens=settings.embed_tokens,
                passages_per_page=settings.passages_per_page,
            )

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
        view = copy.copy(self)
        view.options = replace(self.options, **changes)
        return view

    def close(self) -> None:
        """Release this knowledge base's use of the client; the last user closes it."""
        with _clients_lock:
            self._shared.users -= 1
            if self._shared.users > 0:
                return
            for key in [key for key, shared in _clients.items() if shared is self._shared]:
                del _clients[key]
        with self._lock:
            self.client.close()

    def ping(self) -> bool:
        try:
            with self._lock:
                self.client.get_collections()
        except Exception:  # any failure means "not ready"; /readyz reports it
            return False
        return True

    # --- search -----------------------------------------------------------------------

    def search(
        self, query: str, k: int, *, collection: str | None = None, language: str | None = None
    ) -> list[Passage]:
        if not query.strip():
            return []
        return self.search_by_vector(
            query, self.embedder.embed_query(query), k, collection=collection, language=language
        )

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
        query_filter = models.Filter(must=[_match("language", language)]) if language else None
        dense = [float(x) for x in dense_vector]
        # Deep enough to find k distinct pages. Qdrant's own grouping (query_points_groups)
        # scores and copies every point in local mode: 19 ms p50 instead of 1.6 ms here.
        depth = CANDIDATES_PER_PASSAGE * k
        # Unfiltered, a search takes passages in the query's language and the
        # documentation's: an English question is not answered from the German manual, a
        # German one may be. Chosen in Python from a deeper list: a filter is slow in local mode.
        languages = None if language else {query_language(query), self.language, UNKNOWN_LANGUAGE}
        limit = depth * LANGUAGE_DEPTH_FACTOR if languages else depth
        with self._lock:
            if not self.client.collection_exists(name):
                return []
            if self.hybrid:
                response = self.client.query_points(
                    name,
                    prefetch=[
                        models.Prefetch(query=dense, using=DENSE, limit=depth, filter=query_filter),
                        models.Prefetch(
                            query=sparse.query_vector(query),
                            using=SPARSE,
                            limit=depth,
                            filter=query_filter,
                        ),
                    ],
                    query=models.FusionQuery(fusion=models.Fusion.RRF),
                    limit=limit,
                    with_payload=True,
                )
            else:
                response = self.client.query_points(
                    name, query=dense, using=DENSE, query_filter=query_filter, limit=limit
                )
        points = [
            point
            for point in response.points
            if languages is None or (point.payload or {}).get("language") in languages
        ][:depth]
        candidates = [_passage(point) for point in points]
        if self._fuses_keywords(query, language):
            ids = [str(point.id) for point in points]
            candidates = self._with_keywords(name, query, ids, candidates, depth)
        return _spread_over_pages(candidates, k, self.passages_per_page)

    def _fuses_keywords(self, query: str, language: str | None) -> bool:
        """BM25 (and WordLlama) know the documentation's words: they help a query in its
        language and hurt one in another (README, knowledge-base section)."""
        return (
            (self.keyword_weight > 0 or self._uses_static)
            and language in (None, self.language)
            and query_language(query) == self.language
        )

    @property
    def _uses_static(self) -> bool:
        return self.static_weight > 0 and self.language == "en"  # WordLlama is English

    def _with_keywords(
        self, name: str, query: str, ids: list[str], dense: list[Passage], depth: int
    ) -> list[Passage]:
        """Dense candidates and the best of BM25 and WordLlama, scored cosine + weight ×
        relative BM25 + weight × WordLlama's z-score. A passage the dense search did not
        find gets the lowest cosine among its candidates."""
        index = self._keyword_index(name)
        keyword = dict(index.search(query, depth)) if self.keyword_weight > 0 else {}
        static = dict(index.static_search(query, depth)) if self._uses_static else {}
        if not keyword and not static:
            return dense
        floor = min((passage.score for passage in dense), default=0.0)
        scored = {point_id: passage for point_id, passage in zip(ids, dense, strict=True)}
        for point_id, hit in (keyword | static).items():
            scored.setdefault(point_id, replace(hit.passage, score=floor, similarity=floor))

        def extra(point_id: str) -> float:
            words = keyword[point_id].score if point_id in keyword else 0.0
            nearness = static[point_id].score if point_id in static else 0.0
            return self.keyword_weight * words + self.static_weight * nearness

        fused = [
            replace(passage, score=passage.score + extra(point_id))
            for point_id, passage in scored.items()
        ]
        return sorted(fused, key=lambda passage: passage.score, reverse=True)

    def _keyword_index(self, name: str) -> KeywordIndex:
        """The in-process index of the collection's passages in `language`: built on first
        use, rebuilt when the collection's size changes (checked every few seconds)."""
        key = (name, self.language, self._uses_static)
        now = time.monotonic()
        cached = self._shared.keyword_indexes.get(key)
        if cached and now - cached[1] < KEYWORD_INDEX_CHECK_SECONDS:
            return cached[2]
        with self._lock:
            points = self.client.get_collection(name).points_count or 0
        if cached and cached[0] == points:
            self._shared.keyword_indexes[key] = (points, now, cached[2])
            return cached[2]
        index = KeywordIndex(
            (
                (str(point_id), _passage_of(payload))
                for point_id, payload in self._scroll_with_ids(
                    name, ["text", "title", "heading", "source", "language"]
                )
                if payload.get("language") == self.language
            ),
            self.language,
            static=self._uses_static,
        )
        self._shared.keyword_indexes[key] = (points, now, index)
        return index

    # --- ingestion --------------------------------------------------------------------

    def ingest(
        self,
        path: Path,
        collection: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> IngestReport:
        """Mirror a folder (or add one file) into a collection; see the module docstring."""
        started = time.perf_counter()
        name = collection or self.collection
        path = path.resolve()
        if not path.exists():
            raise FileNotFoundError(f"no such file or folder: {path}")
        root = path if path.is_dir() else path.parent
        files = discover_files(path)
        report = IngestReport(collection=name)
        self._ensure_collection(name)
        stored = self._stored_documents(name, str(root))
        pending: list[_PendingDocument] = []
        seen: set[str] = set()
        for file in files:
            source = file.relative_to(root).as_posix()
            seen.add(source)
            self._ingest_file(file, root, source, stored.get(source), pending, report)
            if sum(len(item.chunks) for item in pending) >= EMBED_BATCH:
                self._write(name, str(root), pending, report)
                pending = []
            if progress:
                progress(source)
        self._write(name, str(root), pending, report)
        if path.is_dir():  # a single file says nothing about its folder's other files
            for source, (_, chunk_count) in stored.items():
                if source not in seen:
                    self._delete_document(name, str(root), source)
                    report.documents_deleted += 1
                    report.chunks_deleted += chunk_count
        if report.changed:  # this process's searches see the new passages at once
            for key in [key for key in self._shared.keyword_indexes if key[0] == name]:
                del self._shared.keyword_indexes[key]
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def _ingest_file(
        self,
        file: Path,
        root: Path,
        source: str,
        previous: tuple[str, int] | None,
        pending: list[_PendingDocument],
        report: IngestReport,
    ) -> None:
        try:
            fingerprint = self._fingerprint(file.read_bytes())
        except OSError as exc:
            report.errors[source] = f"cannot read: {exc.strerror or exc}"
            return
        if previous and previous[0] == fingerprint:
            report.documents_unchanged += 1
            report.chunks_unchanged += previous[1]
            return
        try:
            document = load_document(file, root)
        except LoadError as exc:
            if exc.nothing_to_index:
                report.skipped[source] = str(exc)
            else:
                report.errors[source] = str(exc)
            return
        chunks = chunk_document(document, self.chunk_tokens, self.min_chunk_tokens)
        pending.append(
            _PendingDocument(document, fingerprint, chunks, previous[1] if previous else 0)
        )
        if previous:
            report.documents_updated += 1
        else:
            report.documents_added += 1

    def _fingerprint(self, raw: bytes) -> str:
        settings = "|".join(
            str(value)
            for value in (
                INDEX_VERSION,
                self.embedder.name,
                self.chunk_tokens,
                self.min_chunk_tokens,
                self.embed_tokens,
            )
        )
        return hashlib.sha256(settings.encode() + b"\0" + raw).hexdigest()

    def _write(
        self, name: str, root: str, pending: list[_PendingDocument], report: IngestReport
    ) -> None:
        if not pending:
            return
        items = [
            (item, index, f"{chunk.heading_text or item.document.title}\n{chunk.text}", chunk)
            for item in pending
            for index, chunk in enumerate(item.chunks)
        ]
        # The embedder's cost grows with every token (about 2 ms each for e5 on one core):
        # the dense vector sees the heading and the passage's opening, BM25 sees it all.
        vectors = self.embedder.embed_passages(
            [truncate_to_tokens(text, self.embed_tokens) for _, _, text, _ in items]
        )
        points = [
            models.PointStruct(
                id=str(uuid.uuid5(_POINT_NAMESPACE, f"{root}\n{item.document.source}\n{index}")),
                vector={
                    DENSE: [float(x) for x in vector],
                    SPARSE: sparse.document_vector(indexed_text),
                },
                payload={
                    "text": chunk.text,
                    "title": item.document.title,
                    "heading": chunk.heading_text,
                    "source": item.document.source,
                    "language": item.document.language,
                    "root": root,
                    "fingerprint": item.fingerprint,
                    "chunk": index,
                },
            )
            for (item, index, indexed_text, chunk), vector in zip(items, vectors, strict=True)
        ]
        for item in pending:
            if item.replaces:
                self._delete_document(name, root, item.document.source)
                report.chunks_deleted += item.replaces
        with self._lock:
            self.client.upsert(name, points=points)
        report.chunks_added += len(points)

    def _delete_document(self, name: str, root: str, source: str) -> None:
        with self._lock:
            self.client.delete(
                name,
                points_selector=models.FilterSelector(
                    filter=models.Filter(must=[_match("root", root), _match("source", source)])
                ),
            )

    def _stored_documents(self, name: str, root: str) -> dict[str, tuple[str, int]]:
        """source -> (fingerprint, chunk count) of what was ingested from `root`."""
        fingerprints: dict[str, str] = {}
        counts: Counter[str] = Counter()
        for payload in self._scroll(name, ["source", "fingerprint"], _match("root", root)):
            fingerprints[payload["source"]] = payload["fingerprint"]
            counts[payload["source"]] += 1
        return {source: (fingerprints[source], counts[source]) for source in fingerprints}

    def _scroll(
        self, name: str, fields: list[str], condition: models.Condition | None = None
    ) -> Iterator[dict[str, Any]]:
        for _, payload in self._scroll_with_ids(name, fields, condition):
            yield payload

    def _scroll_with_ids(
        self, name: str, fields: list[str], condition: models.Condition | None = None
    ) -> Iterator[tuple[models.ExtendedPointId, dict[str, Any]]]:
        scroll_filter = models.Filter(must=[condition]) if condition else None
        offset = None
        while True:
            with self._lock:
                points, offset = self.client.scroll(
                    name,
                    scroll_filter=scroll_filter,
                    limit=_SCROLL_PAGE,
                    offset=offset,
                    with_payload=fields,
                    with_vectors=False,
                )
            for point in points:
                yield point.id, point.payload or {}
            if offset is None:
                return

    def _ensure_collection(self, name: str) -> None:
        with self._lock:
            if self.client.collection_exists(name):
                info = self.client.get_collection(name)
                vectors = info.config.params.vectors
                size = vectors[DENSE].size if isinstance(vectors, dict) else None
                if size != self.embedder.dimension:
                    raise EmbedderMismatch(
                        f"collection {name!r} holds {size}-dimensional vectors, the embedder "
                        f"{self.embedder.name} makes {self.embedder.dimension}: ingest into "
                        "another collection or delete this one"
                    )
                return
            self.client.create_collection(
                name,
                vectors_config={
                    DENSE: models.VectorParams(
                        size=self.embedder.dimension, distance=models.Distance.COSINE
                    )
                },
                sparse_vectors_config={
                    SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)
                },
            )
            if not self._local:  # local mode has no payload indexes (and warns)
                for field_name in _INDEXED_FIELDS:
                    self.client.create_payload_index(
                        name, field_name, models.PayloadSchemaType.KEYWORD
                    )

    # --- stats ------------------------------------------------------------------------

    def stats(self, collection: str | None = None) -> KnowledgeStats:
        name = collection or self.collection
        sources: set[tuple[str, str]] = set()
        by_language: Counter[str] = Counter()
        with self._lock:
            exists = self.client.collection_exists(name)
        if exists:
            for payload in self._scroll(name, ["root", "source", "language"]):
                sources.add((payload["root"], payload["source"]))
                by_language[payload["language"]] += 1
        return KnowledgeStats(
            collection=name,
            location=self.location,
            embedder=self.embedder.name,
            hybrid=self.hybrid,
            documents=len(sources),
            chunks=sum(by_language.values()),
            chunks_by_language=dict(sorted(by_language.items())),
        )


def discover_files(path: Path) -> list[Path]:
    """The supported files under a folder (or the file itself), in a stable order."""
    if path.is_file():
        return [path]
    return sorted(
        file
        for file in path.rglob("*")
        if file.is_file()
        and file.suffix.lower() in SUPPORTED_SUFFIXES
        and not any(part.startswith(".") for part in file.relative_to(path).parts)
    )


def _match(key: str, value: str) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


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


def _passage(point: models.ScoredPoint) -> Passage:
    score = float(point.score)
    return replace(_passage_of(point.payload or {}), score=score, similarity=score)


def _passage_of(payload: dict[str, Any]) -> Passage:
    return Passage(
        text=payload.get("text", ""),
        title=payload.get("title", ""),
        heading=payload.get("heading", ""),
        source=payload.get("source", ""),
    )


def _open_local_client(path: Path) -> QdrantClient:
    try:
        return QdrantClient(path=str(path))
    except RuntimeError as exc:
        # qdrant_client.local.qdrant_local: the folder's .lock is held by another client.
        if "already accessed by another instance" in str(exc):
            raise StoreInUse(path) from exc
        raise


_clients: dict[str, _SharedClient] = {}
_clients_lock = threading.Lock()
