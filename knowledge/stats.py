"""What a collection holds: documents, chunks and their languages."""

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def collection_stats(
    knowledge: KnowledgeClient, collection: str, *, embedder: str, hybrid: bool
) -> KnowledgeStats:
    """Counted from the collection's payloads (empty if it does not exist); `embedder` and
    `hybrid` say how the caller searches it."""
    sources: set[tuple[str, str]] = set()
    by_language: Counter[str] = Counter()
    if knowledge.collection_exists(collection):
        for _, payload in knowledge.scroll(collection, ["root", "source", "language"]):
            sources.add((payload["root"], payload["source"]))
            by_language[payload["language"]] += 1
    return KnowledgeStats(
        collection=collection,
        location=knowledge.location,
        embedder=embedder,
        hybrid=hybrid,
        documents=len(sources),
        chunks=sum(by_language.values()),
        chunks_by_language=dict(sorted(by_language.items())),
    )
