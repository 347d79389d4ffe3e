"""The store a process holds per location, shared by search, ingest and stats.

`KnowledgeClient` is the one interface the knowledge base talks to: collections of points
with a dense vector, a BM25 sparse vector and a payload; search, upsert, delete and scroll
by payload fields; counting; building the search index; readiness. Two engines implement
it: Qdrant Edge (`knowledge.edge`), the embedded default on a folder on disk, and
qdrant-client (`knowledge.qdrant_server`), for a Qdrant server and, for comparison in
`kb bench --scale`, qdrant-client's pure-Python local mode. Both keep the same vectors and
payloads, so a knowledge base moves between them by ingesting its folders again; which one
a location gets is `knowledge.stores`' choice, and this module imports neither.

The runtime acquires the store for its settings once and releases it when it stops;
every `KnowledgeBase` made over it meanwhile shares it and its caches (`shared`).
"""

import abc
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qdrant_client import models

logger = logging.getLogger(__name__)

# The named vectors of every collection: the embedder's, and BM25's sparse one.
DENSE = "dense"
SPARSE = "bm25"
# Payload fields searched, mirrored and deleted by: keyword indexes where the engine has them.
INDEXED_FIELDS = ("source", "language", "root")
SCROLL_PAGE = 1000

# Payload field -> the value it must have, or the values one of which it must have.
Where = dict[str, str | list[str]]


class StoreInUse(RuntimeError):
    """A local store's folder is open in another process: it admits one."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"the local Qdrant store {path} is open in another process")
        self.path = path


class EmbedderMismatch(ValueError):
    """A collection's vectors were made by another embedder (their size differs)."""

    def __init__(self, name: str, size: int | None, embedder: str, dimension: int) -> None:
        super().__init__(
            f"collection {name!r} holds {size}-dimensional vectors, the embedder "
            f"{embedder} makes {dimension}: ingest into another collection or delete this one"
        )


@dataclass(frozen=True)
class VectorQuery:
    """A search: the dense vector, or (`sparse` given) Qdrant's RRF of the dense and the
    sparse candidates, each `limit` deep; `where` filters in the engine, as does `any_of`
    (a point matching one of its fields passes); `group_by` makes the engine return at
    most `group_size` points per value of that field; `payload`: the payload fields
    returned (None: all)."""

    dense: list[float]
    limit: int
    sparse: "models.SparseVector | None" = None
    where: Where | None = None
    any_of: Where | None = None
    with_dense: bool = False
    group_by: str | None = None
    group_size: int = 1
    payload: list[str] | None = None


@dataclass(frozen=True)
class ScoredPoint:
    """A point a search found, whichever engine found it."""

    id: str | int
    score: float
    payload: dict[str, Any]
    vector: dict[str, Any] | None = None  # the named vectors asked for (`with_dense`)


@dataclass(eq=False)
class KnowledgeClient(abc.ABC):
    """A store with its location ("local:<folder>" or the server's URL), the lock its
    calls take, and what this process caches about its collections."""

    location: str
    users: int = 1
    # Indexes built in this process from a collection's payloads (`knowledge.store`):
    # (collection, what it is...) -> (points when built, time of the last check, index)
    payload_indexes: dict[tuple[Any, ...], tuple[int, float, Any]] = field(default_factory=dict)
    # The word translations' embedded vocabularies (`knowledge.word_translation`), by the
    # key of their index: kept when the passages change, so a rebuild embeds new words only.
    vocabularies: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    lock: contextlib.AbstractContextManager[Any] = field(
        default_factory=threading.RLock, init=False
    )
    # One build of an index at a time: concurrent first searches wait for it.
    _index_builds: dict[tuple[Any, ...], threading.Lock] = field(default_factory=dict, init=False)
    _index_builds_lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def building(self, key: tuple[Any, ...]) -> threading.Lock:
        """The lock a build of the in-process index `key` holds."""
        with self._index_builds_lock:
            return self._index_builds.setdefault(key, threading.Lock())

    @property
    def local(self) -> bool:
        """Embedded in this process (one process per folder), rather than a server."""
        return not self.location.startswith(("http://", "https://"))

    # Grouping by page in the engine: only a server offers it cheaply.
    groups_in_engine = False

    def release(self) -> None:
        """Release one use of the store; the last user closes it."""
        with _clients_lock:
            self.users -= 1
            if self.users > 0:
                return
            if _clients.get(self.location) is self:
                del _clients[self.location]
        with self.lock:
            self.close()

    @property
    def notice(self) -> str | None:
        """What whoever opens the store should be told, in one line (e.g. how to move an
        old store's passages into it)."""
        return None

    def forget_indexes(self, collection: str) -> None:
        """Drop the in-process indexes of a collection whose passages changed."""
        for key in [key for key in self.payload_indexes if key[0] == collection]:
            del self.payload_indexes[key]

    def ping(self) -> bool:
        """Whether the store answers (/readyz reports it)."""
        try:
            with self.lock:
                self.collection_names()
        except Exception:  # any failure means "not ready"
            return False
        return True

    def collection_exists(self, name: str) -> bool:
        return name in self.collection_names()

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def collection_names(self) -> list[str]: ...

    @abc.abstractmethod
    def ensure_collection(self, name: str, dimension: int, embedder: str) -> None:
        """Create the collection (dense cosine vectors of `dimension`, BM25 sparse vectors
        with IDF, keyword indexes) or check that its vectors are `dimension` long."""

    @abc.abstractmethod
    def upsert(self, name: str, points: "list[models.PointStruct]") -> None: ...

    @abc.abstractmethod
    def delete(self, name: str, where: Where) -> None: ...

    @abc.abstractmethod
    def scroll(
        self, name: str, fields: list[str], where: Where | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(id, payload with `fields`) of every point of a collection (matching `where`)."""

    @abc.abstractmethod
    def count(self, name: str) -> int: ...

    @abc.abstractmethod
    def search(self, name: str, query: VectorQuery) -> list[ScoredPoint]:
        """The best points, best first (grouped ones too)."""

    def optimize(self, name: str) -> bool:
        """Build the collection's search index now (HNSW), off the request path; whether
        there was anything to do. A server builds it in the background by itself."""
        return False


_clients: dict[str, KnowledgeClient] = {}
_clients_lock = threading.Lock()


def shared(location: str, open_store: Callable[[], KnowledgeClient]) -> KnowledgeClient:
    """The process's store at `location`, opened by `open_store` on first use (its notice
    logged then). Each call is matched by one `release`."""
    with _clients_lock:
        store = _clients.get(location)
        if store is None:
            store = open_store()
            if store.notice:
                logger.warning(store.notice)
            _clients[location] = store
        else:
            store.users += 1
        return store
