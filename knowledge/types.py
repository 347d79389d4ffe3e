"""What the rest of the service knows about the knowledge base: passages and a retriever."""

from dataclasses import dataclass
from typing import Any, Protocol

# The payload fields a stored passage is read from (`passage_of`).
PASSAGE_FIELDS = ["text", "title", "heading", "source", "language"]


@dataclass(frozen=True)
class Passage:
    """One retrieved, self-contained piece of a document."""

    text: str
    title: str
    heading: str  # section path, e.g. "Business Features > Invoices > New Invoice"
    source: str  # document path relative to the ingested folder, or a URL
    score: float = 0.0  # what the results are ranked by
    # The dense (embedding) similarity alone, comparable across searches and what relevance
    # thresholds are calibrated on; equal to `score` unless other signals were fused in.
    similarity: float = 0.0
    language: str = ""  # the page's (ISO 639-1), "" when the retriever does not say


def passage_of(payload: dict[str, Any]) -> Passage:
    """A stored point's payload as a passage (no scores)."""
    return Passage(
        text=payload.get("text", ""),
        title=payload.get("title", ""),
        heading=payload.get("heading", ""),
        source=payload.get("source", ""),
        language=payload.get("language", ""),
    )


class Retriever(Protocol):
    def search(self, query: str, k: int) -> list[Passage]: ...
