"""Answers written by the support team, as documents of a collection: each one its own
source `answers/<id>`, found by the same search as the documentation's pages.

A team answer is one short document with a passage per wording: the question and each of
its other wordings is a passage's heading (what the dense vector sees first) with the
answer as the team wrote it for its text, in the wording's own language, so that a
customer's question meets the nearest wording in its language rather than all of them
mixed under the first. Its title is "Support team answer (date)", which is what a
citation of it reads. The search, the evidence gate (`knowledge.evidence`) and the
offline model know such a passage by its source.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import PurePath
from typing import TYPE_CHECKING

from knowledge.chunking import Chunk
from knowledge.ingest import IngestReport, RawDocument
from knowledge.language import identify

if TYPE_CHECKING:  # knowledge.sources and the store know the root: no cycle at run time
    from knowledge.sources import Removed
    from knowledge.store import KnowledgeBase

ROOT = "answers"  # the root their passages are stored under, beside ingested folders
TITLE = "Support team answer"
# Between the wordings and the answer in the document's text (and in the passages an
# earlier version of the service stored): the offline model quotes what follows it.
ANSWER_RULE = "\n---\n"


@dataclass(frozen=True)
class TeamAnswer:
    id: int
    question: str
    variants: Sequence[str]
    answer: str  # Markdown
    language: str  # ISO 639-1 of the answer's text; "" when not known
    updated: date


def source_of(answer_id: int) -> str:
    return f"{ROOT}/{answer_id}"


def is_team_answer(source: str) -> bool:
    return source.startswith(f"{ROOT}/")


def title_of(updated: date) -> str:
    return f"{TITLE} ({updated.isoformat()})"


def wording_language(wording: str, answer_language: str) -> str:
    """A wording's language, read as a query's is; the answer's when too short to tell."""
    return identify(wording, (answer_language,), answer_language).language


def document_of(answer: TeamAnswer) -> RawDocument:
    """The answer as the ingester stores it: a passage per wording (see the module
    docstring); its text, Markdown, is what it is fingerprinted by."""
    question = " ".join(answer.question.split())
    variants = [" ".join(v.split()) for v in answer.variants if v.strip()]
    listed = [f"- {variant}" for variant in variants]
    text = "\n".join([f"# {question}", "", *listed, ANSWER_RULE, answer.answer.strip(), ""])
    passages = [
        Chunk((wording,), answer.answer.strip(), wording_language(wording, answer.language))
        for wording in dict.fromkeys([question, *variants])
    ]
    folder = f"{ROOT}/{answer.language}" if answer.language else ROOT
    return RawDocument(
        source=source_of(answer.id),
        raw=text.encode(),
        suffix=".md",
        location=PurePath(folder, str(answer.id)),
        title=title_of(answer.updated),
        passages=passages,
    )


def answer_text(passage_text: str) -> str:
    """What the team answered, out of a passage of a team answer (its whole text, or what
    follows the rule in a passage stored with its wordings)."""
    _, rule, after = passage_text.partition(ANSWER_RULE.strip())
    return after.strip() if rule else passage_text.strip()


def index(kb: "KnowledgeBase", answer: TeamAnswer, collection: str | None = None) -> IngestReport:
    """Write the answer into the collection (replacing an earlier version of it)."""
    return kb.ingest_documents(ROOT, [document_of(answer)], collection, complete=False)


def unindex(kb: "KnowledgeBase", answer_id: int, collection: str | None = None) -> "Removed":
    """Take the answer out of the collection (nothing when it is not there)."""
    return kb.remove(collection, root=ROOT, source=source_of(answer_id))
