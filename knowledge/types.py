"""What the rest of the service knows about the knowledge base: passages and a retriever."""

from dataclasses import dataclass
from typing import Protocol


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


class Retriever(Protocol):
    def search(self, query: str, k: int) -> list[Passage]: ...
