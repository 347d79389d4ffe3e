"""Ingestion: a folder of documents (or a website's pages, `knowledge.sync`) mirrored
into a Qdrant collection.

Every chunk is a point with a dense vector (the embedder) and a BM25 sparse vector, and in
its payload a second, multilingual vector (`knowledge.crosslingual`). Each
document's fingerprint (its bytes, the embedder and the chunking settings) is stored with
its chunks, so re-ingesting skips unchanged documents, replaces the chunks of changed ones
and deletes those of documents that are gone. Only chunks ingested from the same root (a
folder, a site) are compared, so several roots can share a collection.
"""

import hashlib
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path, PurePath
from typing import Any

import numpy as np

from knowledge import crosslingual, sparse
from knowledge.chunking import Chunk, chunk_document, truncate_to_tokens
from knowledge.client import DENSE, SPARSE, KnowledgeClient
from knowledge.embeddings import Embedder
from knowledge.loaders import (
    SUPPORTED_SUFFIXES,
    Document,
    LoadError,
    language_from_path,
    parse_document,
)
from knowledge.roots import OutsideRoots, read_confined

# Bump when loading or chunking changes, so that re-ingesting rebuilds every document.
INDEX_VERSION = "4"
EMBED_BATCH = 64
_POINT_NAMESPACE = uuid.UUID("0f1d6c52-5e4b-4c6a-9d43-6b8f9e0a7a11")

# Called once per document with its source, then with BUILDING_INDEX if anything changed.
ProgressCallback = Callable[[str], None]
BUILDING_INDEX = "building the search index (HNSW)"
CALIBRATING = 'calibrating "not in the docs" on the collection'  # then, by the knowledge base


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
    index_seconds: float = 0.0  # of `seconds`: building the search index after the writes
    calibration_seconds: float = 0.0  # of `seconds`: calibrating the collection afterwards

    @property
    def changed(self) -> bool:
        return bool(self.documents_added or self.documents_updated or self.documents_deleted)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RawDocument:
    """A document's bytes, read from a file or downloaded, under the source its passages
    cite. `suffix` names the loader that reads it (one of SUPPORTED_SUFFIXES), `location`
    the path its language and, without a title, its name are read from; `stored` goes into
    its passages' payloads (a page's HTTP validators); `title`, when given, is the
    document's title whatever its text says (a heading of its own is then the section's).
    `passages`, when given, are the document's passages as they are stored (each in its
    own language, e.g. a team answer's wordings): `raw` is then neither parsed nor chunked,
    only fingerprinted."""

    source: str
    raw: bytes
    suffix: str
    location: PurePath
    stored: Mapping[str, Any] = field(default_factory=dict)
    title: str | None = None
    passages: Sequence[Chunk] = ()


@dataclass(frozen=True)
class Unreadable:
    """A document that could not be read this time: its stored passages stay."""

    source: str
    message: str


@dataclass(frozen=True)
class Unchanged:
    """A document its origin says has not changed (HTTP 304): its stored passages stay."""

    source: str


Reading = RawDocument | Unreadable | Unchanged


@dataclass
class _PendingDocument:
    document: Document
    fingerprint: str
    chunks: list[Chunk]
    replaces: int  # chunks of the previous version to delete (0 for a new document)
    stored: Mapping[str, Any]


@dataclass(frozen=True)
class Ingester:
    """Writes documents into collections over a shared client, chunked and embedded the
    same way every time (the fingerprint records how)."""

    knowledge: KnowledgeClient
    embedder: Embedder
    chunk_tokens: int = 350
    min_chunk_tokens: int = 30
    embed_tokens: int = 128
    # The multilingual embedder whose vectors each passage's payload also holds
    # (`knowledge.crosslingual`).
    crosslingual: Embedder | None = None

    def ingest(
        self,
        path: Path,
        collection: str,
        progress: ProgressCallback | None = None,
        confined_to: Sequence[Path] = (),
    ) -> IngestReport:
        """Mirror a folder (or add one file) into a collection; see the module docstring.
        With `confined_to` (resolved roots: a path from the network), each file is read
        through a descriptor checked to lie under them (knowledge/roots.py)."""
        path = path.resolve()
        if not path.exists():
            raise FileNotFoundError(f"no such file or folder: {path}")
        root = path if path.is_dir() else path.parent
        return self.ingest_documents(
            collection,
            str(root),
            _read_files(discover_files(path), root, confined_to),
            progress,
            complete=path.is_dir(),  # one file says nothing about its folder's other files
        )

    def ingest_documents(
        self,
        collection: str,
        root: str,
        readings: Iterable[Reading],
        progress: ProgressCallback | None = None,
        *,
        complete: bool,
    ) -> IngestReport:
        """Write what was read from `root` into a collection: new and changed documents are
        (re)indexed, unchanged ones skipped by their fingerprint. `complete`: `readings`
        name every document `root` has now, so the stored ones they do not name are
        deleted. Readings are consumed as they come (a download may make each)."""
        started = time.perf_counter()
        report = IngestReport(collection=collection)
        self._ensure_collection(collection)
        stored = self._stored_documents(collection, root)
        pending: list[_PendingDocument] = []
        seen: set[str] = set()
        vectors_by_text: dict[str, Any] = {}
        # A batch is embedded and written by one worker while the next documents are read
        # and chunked here: the embedder's threads release the GIL, so reading the HTML no
        # longer leaves the cores idle between batches (one batch at a time in flight).
        with ThreadPoolExecutor(1, thread_name_prefix="ingest-write") as writer:
            writing: Future[None] | None = None
            for reading in readings:
                if self._take(reading, stored.get(reading.source), pending, report):
                    seen.add(reading.source)
                if sum(len(item.chunks) for item in pending) >= EMBED_BATCH:
                    if writing:
                        writing.result()
                    writing = writer.submit(
                        self._write, collection, root, pending, report, vectors_by_text
                    )
                    pending = []
                if progress:
                    progress(reading.source)
            if writing:
                writing.result()
        self._write(collection, root, pending, report, vectors_by_text)
        if complete:
            for source, (_, chunk_count) in stored.items():
                if source not in seen:
                    self._delete_document(collection, root, source)
                    report.documents_deleted += 1
                    report.chunks_deleted += chunk_count
        if report.changed:  # this process's searches see the new passages at once
            self.knowledge.forget_indexes(collection)
            # HNSW is built here, once, rather than by the searches that follow.
            if progress:
                progress(BUILDING_INDEX)
            indexing = time.perf_counter()
            self.knowledge.optimize(collection)
            report.index_seconds = round(time.perf_counter() - indexing, 3)
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def _take(
        self,
        reading: Reading,
        previous: tuple[str, int] | None,
        pending: list[_PendingDocument],
        report: IngestReport,
    ) -> bool:
        """Count a reading, and queue its document to be written when it is new or changed;
        False when it has nothing to index (any passages it had are stale: a complete
        ingest deletes them), True when it stays (one that cannot be read keeps its
        passages until it can)."""
        if isinstance(reading, Unreadable):
            report.errors[reading.source] = reading.message
            return True
        fingerprint = "" if isinstance(reading, Unchanged) else self._fingerprint(reading)
        if isinstance(reading, Unchanged) or (previous and previous[0] == fingerprint):
            report.documents_unchanged += 1
            report.chunks_unchanged += previous[1] if previous else 0
            return True
        if reading.passages:
            title = reading.title or reading.location.stem
            language = language_from_path(reading.location)
            document = Document(reading.source, title, language, ())
            chunks = list(reading.passages)
        else:
            try:
                document = parse_document(
                    reading.source, reading.location, reading.raw, reading.suffix
                )
                if reading.title is not None:
                    document = replace(document, title=reading.title)
            except LoadError as exc:
                if exc.nothing_to_index:
                    report.skipped[reading.source] = str(exc)
                    return False
                report.errors[reading.source] = str(exc)
                return True
            chunks = chunk_document(document, self.chunk_tokens, self.min_chunk_tokens)
        pending.append(
            _PendingDocument(
                document, fingerprint, chunks, previous[1] if previous else 0, reading.stored
            )
        )
        if previous:
            report.documents_updated += 1
        else:
            report.documents_added += 1
        return True

    def _fingerprint(self, reading: RawDocument) -> str:
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
        title = b"" if reading.title is None else reading.title.encode() + b"\0"
        passages = "".join(f"{p.language}\0{p.heading_text}\0{p.text}\0" for p in reading.passages)
        content = title + passages.encode() + reading.raw
        return hashlib.sha256(settings.encode() + b"\0" + content).hexdigest()

    def _write(
        self,
        name: str,
        root: str,
        pending: list[_PendingDocument],
        report: IngestReport,
        vectors_by_text: dict[str, Any],
    ) -> None:
        """Embed and store a batch; `vectors_by_text` holds this ingest's vectors so far."""
        if not pending:
            return
        items = [
            (item, index, f"{chunk.heading_text or item.document.title}\n{chunk.text}", chunk)
            for item in pending
            for index, chunk in enumerate(item.chunks)
        ]
        # The embedder's cost grows with every token (about 2 ms each for e5 on one core):
        # the dense vector sees the heading and the passage's opening, BM25 sees it all.
        # Manuals repeat passages (67 of the GnuCash manuals' 1,918 are copies of another):
        # each distinct text is embedded once per ingest.
        embedded = [truncate_to_tokens(text, self.embed_tokens) for _, _, text, _ in items]
        new = [text for text in dict.fromkeys(embedded) if text not in vectors_by_text]
        if new:
            vectors_by_text.update(zip(new, self._vectors(new), strict=True))
        vectors = [vectors_by_text[text] for text in embedded]
        from qdrant_client import models  # ingest's points: serving imports none of it

        points = [
            models.PointStruct(
                id=str(uuid.uuid5(_POINT_NAMESPACE, f"{root}\n{item.document.source}\n{index}")),
                vector={
                    DENSE: [float(x) for x in dense],
                    SPARSE: sparse.document_vector(indexed_text),
                },
                payload={
                    "text": chunk.text,
                    "title": item.document.title,
                    "heading": chunk.heading_text,
                    "source": item.document.source,
                    "language": chunk.language or item.document.language,
                    "root": root,
                    "fingerprint": item.fingerprint,
                    "chunk": index,
                    **item.stored,
                    **({crosslingual.FIELD: second} if second else {}),
                },
            )
            for (item, index, indexed_text, chunk), (dense, second) in zip(
                items, vectors, strict=True
            )
        ]
        for item in pending:
            if item.replaces:
                self._delete_document(name, root, item.document.source)
                report.chunks_deleted += item.replaces
        self.knowledge.upsert(name, points)
        report.chunks_added += len(points)

    def _vectors(self, texts: list[str]) -> list[tuple[Any, str | None]]:
        """Each text's dense vector and, with a multilingual embedder, its encoded vector."""
        dense = self.embedder.embed_passages(texts)
        if self.crosslingual is None:
            return [(vector, None) for vector in dense]
        seconds = crosslingual.encoded(np.asarray(self.crosslingual.embed_passages(texts)))
        return list(zip(dense, seconds, strict=True))

    def _delete_document(self, name: str, root: str, source: str) -> None:
        self.knowledge.delete(name, {"root": root, "source": source})

    def _stored_documents(self, name: str, root: str) -> dict[str, tuple[str, int]]:
        """source -> (fingerprint, chunk count) of what was ingested from `root`."""
        fingerprints: dict[str, str] = {}
        counts: Counter[str] = Counter()
        for _, payload in self.knowledge.scroll(name, ["source", "fingerprint"], {"root": root}):
            fingerprints[payload["source"]] = payload["fingerprint"]
            counts[payload["source"]] += 1
        return {source: (fingerprints[source], counts[source]) for source in fingerprints}

    def _ensure_collection(self, name: str) -> None:
        self.knowledge.ensure_collection(name, self.embedder.dimension, self.embedder.name)


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


def _read_files(files: list[Path], root: Path, confined_to: Sequence[Path]) -> Iterator[Reading]:
    """Each file's bytes, or why it cannot be read; with `confined_to`, through a
    descriptor checked to lie under those roots."""
    for file in files:
        source = file.relative_to(root).as_posix()
        try:
            raw = read_confined(file, confined_to) if confined_to else file.read_bytes()
        except OutsideRoots as refused:
            yield Unreadable(source, f"refused: {refused}")
        except OSError as exc:
            yield Unreadable(source, f"cannot read: {exc.strerror or exc}")
        else:
            yield RawDocument(source, raw, file.suffix.lower(), PurePath(source))
