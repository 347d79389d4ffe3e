"""Qdrant Edge: the Qdrant engine in this process, the embedded knowledge base's store.

`qdrant-edge-py` (pinned: its API is beta) keeps a shard per collection in
`<folder>/edge/<collection>`: the server's segment format, keyword payload indexes on
`source`, `language` and `root`, filters evaluated in the engine, and an HNSW index that
`optimize()` builds after an ingest (until then new points are searched exactly). It has
no grouping: the knowledge base spreads results over pages itself. The folder admits one
process (a lock file), as qdrant-client's local mode did.

A folder that still holds a store of qdrant-client's local mode (`meta.json`,
`collection/`) is not read: its `notice` says to ingest again, and `acquire` logs it.
"""

import fcntl
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import qdrant_edge as edge

from knowledge.client import (
    DENSE,
    INDEXED_FIELDS,
    SCROLL_PAGE,
    SPARSE,
    EmbedderMismatch,
    KnowledgeClient,
    ScoredPoint,
    StoreInUse,
    VectorQuery,
    Where,
)

if TYPE_CHECKING:
    from qdrant_client import models

SHARDS = "edge"  # the shards' folder inside the store's folder
_CONFIG = "edge_config.json"  # what a shard folder holds once created
# Reciprocal rank fusion's k: the Qdrant server's default, so hybrid ranks match it.
RRF_K = 2


def local_mode_store(path: Path) -> bool:
    """Whether the folder holds a store written by qdrant-client's local mode."""
    return (path / "meta.json").is_file() and (path / "collection").is_dir()


def moving_hint(path: Path) -> str:
    return (
        f"{path} holds a knowledge base in qdrant-client's local mode, which is no longer "
        "read: its passages are not searched until `supportbot kb ingest PATH` is run again "
        "for each folder (into Qdrant Edge, in the same place); the old `collection/` and "
        "`meta.json` can then be deleted"
    )


@dataclass(eq=False)
class EdgeStore(KnowledgeClient):
    """Qdrant Edge shards under `folder`, opened on first use and kept open."""

    folder: Path = field(kw_only=True)
    shards: dict[str, edge.EdgeShard] = field(default_factory=dict, kw_only=True)
    # Set when the folder still holds a local-mode store (see the module docstring).
    local_mode_found: bool = field(default=False, kw_only=True)
    # The folder's lock, held while the store is open: one process per folder.
    lock_file: IO[bytes] | None = field(default=None, kw_only=True)

    @classmethod
    def open(cls, path: Path) -> "EdgeStore":
        path = path.resolve()
        (path / SHARDS).mkdir(parents=True, exist_ok=True)
        lock_file = (path / SHARDS / ".lock").open("wb")
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.close()
            raise StoreInUse(path) from None
        store = cls(
            f"local:{path}",
            folder=path,
            local_mode_found=local_mode_store(path),
            lock_file=lock_file,
        )
        return store

    @property
    def notice(self) -> str | None:
        return moving_hint(self.folder) if self.local_mode_found else None

    def close(self) -> None:
        for shard in self.shards.values():
            shard.close()
        self.shards.clear()
        if self.lock_file:
            self.lock_file.close()  # releases the flock
            self.lock_file = None

    def collection_names(self) -> list[str]:
        if self.lock_file is None:
            raise RuntimeError(f"the local Qdrant store {self.folder} is closed")
        root = self.folder / SHARDS
        return sorted(child.name for child in root.iterdir() if (child / _CONFIG).is_file())

    def _shard(self, name: str) -> edge.EdgeShard:
        shard = self.shards.get(name)
        if shard is None:
            with self.lock:
                shard = self.shards.get(name)
                if shard is None:
                    shard = edge.EdgeShard.load(str(self.folder / SHARDS / name))
                    self.shards[name] = shard
        return shard

    def ensure_collection(self, name: str, dimension: int, embedder: str) -> None:
        with self.lock:
            if name in self.collection_names():
                vectors = _shard_config(self.folder / SHARDS / name)["vectors"]
                size = vectors.get(DENSE, {}).get("size")
                if size != dimension:
                    raise EmbedderMismatch(name, size, embedder, dimension)
                return
            # Vectors mapped `Cold`, read as searches touch them (then kept in the page
            # cache): Qdrant's default reads the whole preallocated first chunk in when a
            # shard opens, 32 MB however few the passages.
            config = edge.EdgeConfig(
                vectors={
                    DENSE: edge.EdgeVectorParams(
                        size=dimension, distance=edge.Distance.Cosine, memory=edge.Memory.Cold
                    )
                },
                sparse_vectors={SPARSE: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)},
            )
            shard = edge.EdgeShard.create(str(self.folder / SHARDS / name), config)
            for field_name in INDEXED_FIELDS:
                shard.update(
                    edge.UpdateOperation.create_field_index(
                        field_name, edge.PayloadSchemaType.Keyword
                    )
                )
            self.shards[name] = shard

    def upsert(self, name: str, points: "list[models.PointStruct]") -> None:
        converted = [
            edge.Point(str(point.id), _edge_vectors(point.vector), point.payload or {})
            for point in points
        ]
        self._shard(name).update(edge.UpdateOperation.upsert_points(converted))

    def delete(self, name: str, where: Where) -> None:
        self._shard(name).update(edge.UpdateOperation.delete_points_by_filter(_filter(where)))

    def scroll(
        self, name: str, fields: list[str], where: Where | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        shard = self._shard(name)
        offset: Any = None
        while True:
            records, offset = shard.scroll(
                edge.ScrollRequest(
                    offset=offset,
                    limit=SCROLL_PAGE,
                    filter=_filter(where) if where else None,
                    with_payload=fields,
                    with_vector=False,
                )
            )
            for record in records:
                yield str(record.id), record.payload or {}
            if offset is None:
                return

    def count(self, name: str) -> int:
        return self._shard(name).count(edge.CountRequest(exact=True))

    def search(self, name: str, query: VectorQuery) -> list[ScoredPoint]:
        query_filter = (
            _filter(query.where or {}, query.any_of) if query.where or query.any_of else None
        )
        dense = edge.Query.Nearest(query.dense, using=DENSE)
        vectors: list[str] | bool = [DENSE] if query.with_dense else False
        if query.sparse is None:
            request = edge.QueryRequest(
                limit=query.limit,
                query=dense,
                filter=query_filter,
                with_payload=query.payload or True,
                with_vector=vectors,
            )
        else:
            words = edge.SparseVector(query.sparse.indices, query.sparse.values)
            request = edge.QueryRequest(
                limit=query.limit,
                prefetches=[
                    edge.Prefetch(limit=query.limit, query=dense, filter=query_filter),
                    edge.Prefetch(
                        limit=query.limit,
                        query=edge.Query.Nearest(words, using=SPARSE),
                        filter=query_filter,
                    ),
                ],
                query=edge.Fusion.Rrf(k=RRF_K),  # type: ignore[arg-type]  # the stub omits Rrf
                with_payload=query.payload or True,
                with_vector=vectors,
            )
        return [_scored(point) for point in self._shard(name).query(request)]

    def optimize(self, name: str) -> bool:
        return self._shard(name).optimize()


def _shard_config(path: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((path / _CONFIG).read_text())
    return config


def _edge_vectors(vector: Any) -> dict[str, Any]:
    sparse = vector[SPARSE]
    return {DENSE: vector[DENSE], SPARSE: edge.SparseVector(sparse.indices, sparse.values)}


def _filter(where: Where, any_of: Where | None = None) -> edge.Filter:
    """Points matching every field of `where` and (given) one field of `any_of`."""
    return edge.Filter(must=_conditions(where), should=_conditions(any_of) if any_of else None)


def _conditions(where: Where) -> list[Any]:  # the conditions Filter takes
    return [
        edge.FieldCondition(
            key, match=edge.MatchAny(value) if isinstance(value, list) else edge.MatchValue(value)
        )
        for key, value in where.items()
    ]


def _scored(point: edge.ScoredPoint) -> ScoredPoint:
    vector = point.vector if isinstance(point.vector, dict) else None
    point_id = str(point.id) if isinstance(point.id, uuid.UUID) else point.id
    return ScoredPoint(point_id, point.score, point.payload or {}, vector)
