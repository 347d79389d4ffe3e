"""qdrant-client's store: a Qdrant server, or (for comparison in `kb bench --scale`) its
pure-Python local mode on a folder. Its library loads only when such a store is opened."""

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from qdrant_client import QdrantClient, models

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


def condition_filter(where: Where | None, any_of: Where | None = None) -> models.Filter | None:
    """Points matching every field of `where` and (given) one field of `any_of`."""
    if not where and not any_of:
        return None
    return models.Filter(
        must=_conditions(where or {}), should=_conditions(any_of) if any_of else None
    )


def _conditions(where: Where) -> list[models.FieldCondition]:
    return [
        models.FieldCondition(
            key=key,
            match=models.MatchAny(any=value)
            if isinstance(value, list)
            else models.MatchValue(value=value),
        )
        for key, value in where.items()
    ]


@dataclass(eq=False)
class QdrantClientStore(KnowledgeClient):
    """A Qdrant server (thread-safe, no lock), or qdrant-client's local mode: a folder
    scored by numpy, one client per folder and process, not thread-safe (every call takes
    the lock), no payload indexes."""

    client: QdrantClient = field(kw_only=True)

    @classmethod
    def connect(cls, url: str, api_key: str | None) -> "QdrantClientStore":
        return cls(url, client=QdrantClient(url=url, api_key=api_key))

    def __post_init__(self) -> None:
        if not self.local:
            self.lock = contextlib.nullcontext()

    @property
    def groups_in_engine(self) -> bool:  # type: ignore[override]
        return not self.local

    @classmethod
    def open_local_mode(cls, path: Path) -> "QdrantClientStore":
        path = path.resolve()
        path.mkdir(parents=True, exist_ok=True)
        try:
            client = QdrantClient(path=str(path))
        except RuntimeError as exc:
            # qdrant_client.local.qdrant_local: the folder's .lock is held by another client.
            if "already accessed by another instance" in str(exc):
                raise StoreInUse(path) from exc
            raise
        return cls(f"qdrant-local:{path}", client=client)

    def close(self) -> None:
        self.client.close()

    def collection_names(self) -> list[str]:
        with self.lock:
            return [collection.name for collection in self.client.get_collections().collections]

    def collection_exists(self, name: str) -> bool:
        with self.lock:
            return self.client.collection_exists(name)

    def ensure_collection(self, name: str, dimension: int, embedder: str) -> None:
        with self.lock:
            if self.client.collection_exists(name):
                vectors = self.client.get_collection(name).config.params.vectors
                size = vectors[DENSE].size if isinstance(vectors, dict) else None
                if size != dimension:
                    raise EmbedderMismatch(name, size, embedder, dimension)
                return
            self.client.create_collection(
                name,
                vectors_config={
                    DENSE: models.VectorParams(size=dimension, distance=models.Distance.COSINE)
                },
                sparse_vectors_config={
                    SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)
                },
            )
            if not self.local:  # local mode has no payload indexes (and warns)
                for field_name in INDEXED_FIELDS:
                    self.client.create_payload_index(
                        name, field_name, models.PayloadSchemaType.KEYWORD
                    )

    def upsert(self, name: str, points: list[models.PointStruct]) -> None:
        with self.lock:
            self.client.upsert(name, points=points)

    def delete(self, name: str, where: Where) -> None:
        with self.lock:
            self.client.delete(
                name, points_selector=models.FilterSelector(filter=condition_filter(where))
            )

    def scroll(
        self, name: str, fields: list[str], where: Where | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        offset = None
        while True:
            with self.lock:
                points, offset = self.client.scroll(
                    name,
                    scroll_filter=condition_filter(where),
                    limit=SCROLL_PAGE,
                    offset=offset,
                    with_payload=fields,
                    with_vectors=False,
                )
            for point in points:
                yield str(point.id), point.payload or {}
            if offset is None:
                return

    def count(self, name: str) -> int:
        with self.lock:
            return self.client.get_collection(name).points_count or 0

    def search(self, name: str, query: VectorQuery) -> list[ScoredPoint]:
        query_filter = condition_filter(query.where, query.any_of)
        arguments: dict[str, Any] = {
            "limit": query.limit,
            "with_payload": query.payload or True,
            "with_vectors": [DENSE] if query.with_dense else False,
        }
        if query.sparse is None:
            arguments |= {"query": query.dense, "using": DENSE, "query_filter": query_filter}
        else:
            arguments["prefetch"] = [
                models.Prefetch(
                    query=query.dense, using=DENSE, limit=query.limit, filter=query_filter
                ),
                models.Prefetch(
                    query=query.sparse, using=SPARSE, limit=query.limit, filter=query_filter
                ),
            ]
            arguments["query"] = models.FusionQuery(fusion=models.Fusion.RRF)
        with self.lock:
            if query.group_by is None:
                hits = self.client.query_points(name, **arguments).points
            else:
                response = self.client.query_points_groups(
                    name, group_by=query.group_by, group_size=query.group_size, **arguments
                )
                hits = [hit for group in response.groups for hit in group.hits]
        found = [
            ScoredPoint(
                str(hit.id) if isinstance(hit.id, UUID) else hit.id,
                hit.score,
                hit.payload or {},
                hit.vector if isinstance(hit.vector, dict) else None,
            )
            for hit in hits
        ]
        return sorted(found, key=lambda point: point.score, reverse=True)
