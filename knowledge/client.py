"""The Qdrant client a process holds per location, shared by search, ingest and stats.

Local mode (a folder on disk) admits one client per folder and process, and that client is
not thread-safe, so every call goes through `lock`; a server client is thread-safe. The
runtime acquires the client for its settings once and releases it when it stops; every
`KnowledgeBase` made over it meanwhile shares it and its caches.
"""

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qdrant_client import QdrantClient, models

from app.settings import KnowledgeSettings
from knowledge.keywords import KeywordIndex

# The named vectors of every collection: the embedder's, and BM25's sparse one.
DENSE = "dense"
SPARSE = "bm25"
_SCROLL_PAGE = 1000


class StoreInUse(RuntimeError):
    """A local Qdrant folder is open in another process: local mode allows one client."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"the local Qdrant store {path} is open in another process")
        self.path = path


@dataclass
class KnowledgeClient:
    """A Qdrant client with its location ("local:<folder>" or the server's URL), the lock
    its calls take, and what this process caches about its collections."""

    client: QdrantClient
    location: str
    users: int = 0
    # (collection, language, with WordLlama) -> (points when built, time of the last check,
    # index)
    keyword_indexes: dict[tuple[str, str, bool], tuple[int, float, KeywordIndex]] = field(
        default_factory=dict
    )
    lock: contextlib.AbstractContextManager[Any] = field(init=False)

    def __post_init__(self) -> None:
        self.lock = threading.RLock() if self.local else contextlib.nullcontext()

    @property
    def local(self) -> bool:
        return self.location.startswith("local:")

    @classmethod
    def acquire(cls, settings: KnowledgeSettings) -> "KnowledgeClient":
        """The process's client for the settings' location (opened on first use); each
        `acquire` is matched by one `release`."""
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
                    shared = cls(client, location, users=1)
                else:
                    shared = cls.open_local(settings.qdrant_path)
                _clients[location] = shared
            else:
                shared.users += 1
            return shared

    @classmethod
    def open_local(cls, path: Path) -> "KnowledgeClient":
        """A client of its own on a local folder (not shared through `acquire`)."""
        path = path.resolve()
        path.mkdir(parents=True, exist_ok=True)
        try:
            client = QdrantClient(path=str(path))
        except RuntimeError as exc:
            # qdrant_client.local.qdrant_local: the folder's .lock is held by another client.
            if "already accessed by another instance" in str(exc):
                raise StoreInUse(path) from exc
            raise
        return cls(client, f"local:{path}", users=1)

    def release(self) -> None:
        """Release one use of the client; the last user closes it."""
        with _clients_lock:
            self.users -= 1
            if self.users > 0:
                return
            if _clients.get(self.location) is self:
                del _clients[self.location]
        with self.lock:
            self.client.close()

    def ping(self) -> bool:
        try:
            with self.lock:
                self.client.get_collections()
        except Exception:  # any failure means "not ready"; /readyz reports it
            return False
        return True

    def collection_exists(self, name: str) -> bool:
        with self.lock:
            return self.client.collection_exists(name)

    def forget_indexes(self, collection: str) -> None:
        """Drop the keyword indexes of a collection whose passages changed."""
        for key in [key for key in self.keyword_indexes if key[0] == collection]:
            del self.keyword_indexes[key]

    def scroll(
        self, name: str, fields: list[str], condition: models.Condition | None = None
    ) -> Iterator[tuple[models.ExtendedPointId, dict[str, Any]]]:
        """(id, payload) of every point of a collection (matching `condition`)."""
        scroll_filter = models.Filter(must=[condition]) if condition else None
        offset = None
        while True:
            with self.lock:
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


def match(key: str, value: str) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


_clients: dict[str, KnowledgeClient] = {}
_clients_lock = threading.Lock()
