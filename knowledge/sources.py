"""What a collection was ingested from, and taking it out again: the folders (roots) and
documents (sources) its passages came from, removal by either, and the rule that keeps the
sample knowledge base from mixing with a user's own documentation.

The sample (`knowledge/sample_kb`) is what `make run` ingests into an empty default
collection so that a new install can answer something. The first folder of the user's own
that is ingested into that collection replaces it (`replace_sample`), and the sample is
never ingested again into a collection that holds anything else (`holds_other_than`).
"""

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from knowledge.client import KnowledgeClient
from knowledge.team_answers import ROOT as TEAM_ANSWERS


@dataclass(frozen=True)
class Removed:
    documents: int
    chunks: int


def documents_by_root(knowledge: KnowledgeClient, collection: str) -> dict[str, int]:
    """Ingested folder -> documents from it."""
    if not knowledge.collection_exists(collection):
        return {}
    documents: set[tuple[str, str]] = {
        (payload["root"], payload["source"])
        for _, payload in knowledge.scroll(collection, ["root", "source"])
    }
    return dict(sorted(Counter(root for root, _ in documents).items()))


def remove(
    knowledge: KnowledgeClient,
    collection: str,
    *,
    root: str | None = None,
    source: str | None = None,
) -> Removed:
    """Delete the passages of one ingested folder (`root`), of one document (`source`, a
    path inside its folder), of one document of one folder (both), or of every folder
    (neither)."""
    if not knowledge.collection_exists(collection):
        return Removed(0, 0)
    where: dict[str, str | list[str]] = {}
    if root is not None:
        where["root"] = root
    if source is not None:
        where["source"] = source
    found = [payload for _, payload in knowledge.scroll(collection, ["root", "source"], where)]
    documents = {(payload["root"], payload["source"]) for payload in found}
    if found:
        if where:
            knowledge.delete(collection, where)
        else:
            for folder in {payload["root"] for payload in found}:
                knowledge.delete(collection, {"root": folder})
        knowledge.forget_indexes(collection)
    return Removed(len(documents), len(found))


def holds_other_than(knowledge: KnowledgeClient, collection: str, root: Path) -> bool:
    """Whether the collection holds documents ingested from anywhere but `root` (the
    support team's answers are no documentation: they live beside the sample too)."""
    own = (str(root.resolve()), TEAM_ANSWERS)
    return any(folder not in own for folder in documents_by_root(knowledge, collection))


def replace_sample(
    knowledge: KnowledgeClient, collection: str, sample: Path, ingesting: Path | None
) -> Removed | None:
    """Before the user's own folder (or, `ingesting` None, website) is ingested: take the
    sample knowledge base out of the collection (None when it is not there, or when the
    sample itself is being ingested)."""
    sample_root = str(sample.resolve())
    folder = ingesting.resolve() if ingesting else None
    if folder and (folder if folder.is_dir() else folder.parent) == Path(sample_root):
        return None
    if sample_root not in documents_by_root(knowledge, collection):
        return None
    return remove(knowledge, collection, root=sample_root)
