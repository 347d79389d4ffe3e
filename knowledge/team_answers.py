"""Answers written by the support team, as documents of a collection: each one its own
source `answers/<id>`, found by the same search as the documentation's pages.

A team answer is one short Markdown document: the question as its heading (what the
dense vector sees first), its other wordings as a list, a rule, then the answer as the
team wrote it. Its title is "Support team answer (date)", which is what a citation of it
reads; its language is the one the answer is written in. The search, the evidence gate
(`knowledge.evidence`) and the offline model know such a passage by its source.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import PurePath
from typing import TYPE_CHECKING

from knowledge.ingest import IngestReport, RawDocument

if TYPE_CHECKING:  # knowledge.sources and the store know the root: no cycle at run time
    from knowledge.sources import Removed
    from knowledge.store import KnowledgeBase

ROOT = "answers"  # the root their passages are stored under, beside ingested folders
TITLE = "Support team answer"
# Between the wordings and the answer: the offline model quotes what follows it.
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


def document_of(answer: TeamAnswer) -> RawDocument:
    """The answer as the ingester reads it: Markdown, its language in its location."""
    question = " ".join(answer.question.split())
    wordings = [f"- {' '.join(v.split())}" for v in answer.variants if v.strip()]
    text = "\n".join([f"# {question}", "", *wordings, ANSWER_RULE, answer.answer.strip(), ""])
    folder = f"{ROOT}/{answer.language}" if answer.language else ROOT
    return RawDocument(
        source=source_of(answer.id),
        raw=text.encode(),
        suffix=".md",
        location=PurePath(folder, str(answer.id)),
        title=title_of(answer.updated),
    )


def answer_text(passage_text: str) -> str:
    """What the team answered, out of a passage of a team answer (a long answer's later
    passages hold only answer text)."""
    _, rule, after = passage_text.partition(ANSWER_RULE.strip())
    return after.strip() if rule else passage_text.strip()


def index(kb: "KnowledgeBase", answer: TeamAnswer, collection: str | None = None) -> IngestReport:
    """Write the answer into the collection (replacing an earlier version of it)."""
    return kb.ingest_documents(ROOT, [document_of(answer)], collection, complete=False)


def unindex(kb: "KnowledgeBase", answer_id: int, collection: str | None = None) -> "Removed":
    """Take the answer out of the collection (nothing when it is not there)."""
    return kb.remove(collection, root=ROOT, source=source_of(answer_id))
