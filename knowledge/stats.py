"""What a collection holds: documents, chunks and their languages."""

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from knowledge.calibration.collection import load_calibration
from knowledge.client import KnowledgeClient


@dataclass(frozen=True)
class KnowledgeStats:
    collection: str
    location: str
    embedder: str
    hybrid: bool
    documents: int
    chunks: int
    chunks_by_language: dict[str, int]
    documents_by_folder: dict[str, int]  # the folders ingested into it
    # The relevance thresholds by question language that ingest calibrated on the
    # collection ("" for any other language); None before its first calibrated ingest.
    calibration: dict[str, float] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def collection_stats(
    knowledge: KnowledgeClient, collection: str, *, embedder: str, hybrid: bool
) -> KnowledgeStats:
    """Counted from the collection's payloads (empty if it does not exist); `embedder` and
    `hybrid` say how the caller searches it."""
    sources: set[tuple[str, str]] = set()
    folders: Counter[str] = Counter()
    by_language: Counter[str] = Counter()
    if knowledge.collection_exists(collection):
        for _, payload in knowledge.scroll(collection, ["root", "source", "language"]):
            if (payload["root"], payload["source"]) not in sources:
                folders[payload["root"]] += 1
            sources.add((payload["root"], payload["source"]))
            by_language[payload["language"]] += 1
    calibrated = load_calibration(knowledge, collection) if sources else None
    return KnowledgeStats(
        collection=collection,
        location=knowledge.location,
        embedder=embedder,
        hybrid=hybrid,
        documents=len(sources),
        chunks=sum(by_language.values()),
        chunks_by_language=dict(sorted(by_language.items())),
        documents_by_folder=dict(sorted(folders.items())),
        calibration=calibrated.thresholds if calibrated else None,
    )
