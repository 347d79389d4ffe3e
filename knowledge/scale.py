"""`kb bench --scale`: the embedded stores at sizes past today's manuals.

The GnuCash passages (ingested for real: e5 vectors, BM25 vectors, payloads) are padded
with generated filler to each size: random unit vectors (the e5 size), text drawn from
the manuals' words, and languages and pages spread like a multilingual help centre. For
each store and size a fresh process upserts every point and builds the index
(`optimize`, Qdrant Edge only); then another fresh process opens the store as the service
would and runs the dev questions' vectors as searches of 32 points (the depth the service
asks for at k = 4) without a filter and filtered to one language. Each reports its own
peak RSS. The engines run one after the other in the same invocation.
"""

import multiprocessing
import pickle
import random
import resource
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from qdrant_client import models

from knowledge import stores
from knowledge.bench import percentile
from knowledge.client import DENSE, SPARSE, KnowledgeClient, VectorQuery, Where
from knowledge.edge import EdgeStore

ENGINES = ("qdrant-local", "edge")
SEARCH_LIMIT = 32
UPSERT_BATCH = 1000
_FILLER_LANGUAGES = ("en",) * 6 + ("de",) * 2 + ("ru", "fr")  # 60% English
_FILLER_NAMESPACE = uuid.UUID("5b1f2c1e-3c0a-4d7e-9a51-0c3f7e1d2b90")
_COLLECTION = "scale"


@dataclass(frozen=True)
class ScaleFigures:
    engine: str
    points: int
    upsert_seconds: float
    optimize_seconds: float
    build_peak_rss_mb: float
    search_p50_ms: float
    search_p95_ms: float
    filtered_p50_ms: float
    filtered_p95_ms: float
    serving_peak_rss_mb: float  # the process that opened the built store and searched it
    searches: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def passages_of(store: EdgeStore, collection: str) -> list[models.PointStruct]:
    """Every point of an Edge collection with its vectors, as points to upsert elsewhere."""
    import qdrant_edge as edge

    shard = store.shards[collection]
    points: list[models.PointStruct] = []
    offset: Any = None
    while True:
        records, offset = shard.scroll(
            edge.ScrollRequest(offset=offset, limit=1000, with_payload=True, with_vector=True)
        )
        for record in records:
            vectors: dict[str, Any] = record.vector if isinstance(record.vector, dict) else {}
            words = vectors[SPARSE]
            points.append(
                models.PointStruct(
                    id=str(record.id),
                    vector={
                        DENSE: list(vectors[DENSE]),
                        SPARSE: models.SparseVector(indices=words.indices, values=words.values),
                    },
                    payload=record.payload or {},
                )
            )
        if offset is None:
            return points


def filler_points(
    passages: list[models.PointStruct], count: int, dimension: int
) -> Iterator[list[models.PointStruct]]:
    """`count` generated points in batches, the same for every engine (fixed seeds)."""
    from knowledge import sparse

    words = sorted(
        {word for point in passages for word in str((point.payload or {}).get("text", "")).split()}
    )
    for start in range(0, count, UPSERT_BATCH):
        size = min(UPSERT_BATCH, count - start)
        rng = np.random.default_rng(start)
        vectors = rng.standard_normal((size, dimension), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        chooser = random.Random(start)
        batch = []
        for offset, vector in enumerate(vectors):
            number = start + offset
            text = " ".join(chooser.choices(words, k=60)) if words else f"passage {number}"
            batch.append(
                models.PointStruct(
                    id=str(uuid.uuid5(_FILLER_NAMESPACE, str(number))),
                    vector={DENSE: vector.tolist(), SPARSE: sparse.document_vector(text)},
                    payload={
                        "text": text,
                        "title": f"Filler page {number // 8}",
                        "heading": "",
                        "source": f"filler/{number // 8}.html",
                        "language": _FILLER_LANGUAGES[number % len(_FILLER_LANGUAGES)],
                        "root": "filler",
                        "fingerprint": "",
                        "chunk": number % 8,
                    },
                )
            )
        yield batch


def build(engine: str, points: int, data: Path, store_path: Path) -> dict[str, Any]:
    """Upsert `points` points and build the index, in this process: times and peak RSS."""
    passages, queries = pickle.loads(data.read_bytes())
    dimension = len(queries[0])
    store = stores.open_local(store_path, engine)
    try:
        store.ensure_collection(_COLLECTION, dimension, "bench")
        started = time.perf_counter()
        for batch_start in range(0, len(passages), UPSERT_BATCH):
            store.upsert(_COLLECTION, passages[batch_start : batch_start + UPSERT_BATCH])
        for batch in filler_points(passages, max(0, points - len(passages)), dimension):
            store.upsert(_COLLECTION, batch)
        upserted = time.perf_counter()
        store.optimize(_COLLECTION)
        optimized = time.perf_counter()
    finally:
        store.release()
    return {
        "upsert_seconds": round(upserted - started, 1),
        "optimize_seconds": round(optimized - upserted, 1),
        "build_peak_rss_mb": _peak_rss_mb(),
    }


def serve(engine: str, data: Path, store_path: Path, language: str = "en") -> dict[str, Any]:
    """Open a built store and time the searches, in this process: latencies and peak RSS."""
    _, queries = pickle.loads(data.read_bytes())
    store = stores.open_local(store_path, engine)
    try:
        plain = _timed(store, queries, None)
        filtered = _timed(store, queries, language)
        points = store.count(_COLLECTION)
    finally:
        store.release()
    return {
        "points": points,
        "search_p50_ms": round(percentile(plain, 50), 2),
        "search_p95_ms": round(percentile(plain, 95), 2),
        "filtered_p50_ms": round(percentile(filtered, 50), 2),
        "filtered_p95_ms": round(percentile(filtered, 95), 2),
        "serving_peak_rss_mb": _peak_rss_mb(),
        "searches": len(plain),
    }


def _peak_rss_mb() -> float:
    # ru_maxrss: this process's peak, in KiB on Linux.
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _timed(store: KnowledgeClient, queries: list[list[float]], language: str | None) -> list[float]:
    where: Where | None = {"language": language} if language else None
    store.search(_COLLECTION, VectorQuery(dense=queries[0], limit=SEARCH_LIMIT, where=where))
    elapsed = []
    for query in queries:
        started = time.perf_counter()
        store.search(_COLLECTION, VectorQuery(dense=query, limit=SEARCH_LIMIT, where=where))
        elapsed.append((time.perf_counter() - started) * 1000)
    return elapsed


def run(
    passages: list[models.PointStruct],
    queries: list[list[float]],
    sizes: list[int],
    work: Path,
    engines: tuple[str, ...] = ENGINES,
    report: Callable[[ScaleFigures], None] | None = None,
) -> list[ScaleFigures]:
    """Each engine at each size built, then searched, in fresh processes, one at a time, on
    stores under `work`."""
    data = work / "points.pickle"
    data.write_bytes(pickle.dumps((passages, queries)))
    figures = []
    spawn = multiprocessing.get_context("spawn")
    for size in sizes:
        for engine in engines:
            store = work / f"{engine}-{size}"
            with ProcessPoolExecutor(1, mp_context=spawn) as child:
                built = child.submit(build, engine, size, data, store).result()
            with ProcessPoolExecutor(1, mp_context=spawn) as child:
                served = child.submit(serve, engine, data, store).result()
            measured = ScaleFigures(engine=engine, **built, **served)
            figures.append(measured)
            if report:
                report(measured)
    return figures
