"""Answers on a documentation folder, as a new user meets them: `supportbot eval answers
--kb FOLDER --questions FILE`.

The folder is ingested into a collection of its own (the calibration that ingest makes
included), then every question is served as a fresh client conversation through the
service's own `Runtime` with the configured settings (the shipped defaults unless the
environment says otherwise). Each reply is scored from what the turn returned — its text,
outcome and citations — never from how the model chose it:

- answerable questions: **right** (the reply holds every fact of one of the question's
  answers), **wrong section** (not right, but it cites the answering page), **wrong page**
  (not right, citing other pages), **unsure, page offered** (outcome `not_found` with the
  answering page among the first three pages offered), **refused** (any other
  `not_found`, or a handoff); *useful* is right + unsure with the page offered;
- unanswerable questions: **told** "not in the docs" (outcome `not_found`), or answered.

Facts are matched on the reply's text with case, emphasis markers, quotes and runs of
white space folded (`folded`): the metric's own reading, sharing nothing with the model.
"""

import asyncio
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import TYPE_CHECKING, Any

from app.chat.types import TurnReply, TurnRequest
from app.db import migrate
from app.settings import Settings
from knowledge.ingest import IngestReport
from knowledge.yaml_files import read_yaml

if TYPE_CHECKING:
    from app.runtime import Runtime

ANSWERABLE_VERDICTS = ("right", "wrong_section", "wrong_page", "unsure_offered", "refused")
UNANSWERABLE_VERDICTS = ("told", "answered")
# How many pages an unsure reply may offer for the answering one to count as offered.
OFFERED_PAGES = 3

_FOLDED_OUT = re.compile(r"[*_`\"'«»“”„‚‘’]")
_SPACE = re.compile(r"\s+")


def folded(text: str) -> str:
    """Text as facts are matched in it: NFKC, lower case, no emphasis markers or quotes,
    single spaces."""
    plain = _FOLDED_OUT.sub("", unicodedata.normalize("NFKC", text).lower())
    return _SPACE.sub(" ", plain).strip()


@dataclass(frozen=True)
class Answer:
    page: str
    facts: tuple[str, ...]
    section: str = ""


@dataclass(frozen=True)
class Question:
    text: str
    language: str
    answers: tuple[Answer, ...] = ()  # empty: the documentation does not answer it

    @property
    def answerable(self) -> bool:
        return bool(self.answers)

    @property
    def pages(self) -> set[str]:
        return {answer.page for answer in self.answers}


def question_of(item: dict[str, Any]) -> Question:
    """A question as a question-set file writes it: text, language, answers."""
    answers = tuple(
        Answer(entry["page"], tuple(entry["facts"]), entry.get("section", ""))
        for entry in item.get("answers") or []
    )
    return Question(item["text"], item.get("language", "en"), answers)


def load_question_set(path: Path) -> tuple[str, list[Question]]:
    """The corpus name and the questions of a question-set file (evals/answers/)."""
    data = read_yaml(path)
    questions = []
    for item in data.get("questions") or []:
        question = question_of(item)
        if item.get("docs") == "answerable" and not question.answerable:
            raise ValueError(f"{path}: answerable question without answers: {item['text']!r}")
        questions.append(question)
    return str(data.get("corpus") or path.stem), questions


def verdict(question: Question, reply: TurnReply) -> str:
    """One of `ANSWERABLE_VERDICTS` or `UNANSWERABLE_VERDICTS` (see the module docstring)."""
    cited = [citation.source for citation in reply.citations]
    if not question.answerable:
        return "told" if reply.outcome == "not_found" else "answered"
    if reply.outcome == "not_found":
        return "unsure_offered" if question.pages & set(cited[:OFFERED_PAGES]) else "refused"
    if reply.outcome in ("handed_off", "quiet"):
        return "refused"
    text = folded(reply.text)
    if any(all(folded(fact) in text for fact in answer.facts) for answer in question.answers):
        return "right"
    return "wrong_section" if question.pages & set(cited) else "wrong_page"


@dataclass
class LanguageFigures:
    language: str
    answerable: Counter[str] = field(default_factory=Counter)
    unanswerable: Counter[str] = field(default_factory=Counter)

    @property
    def answerable_count(self) -> int:
        return sum(self.answerable.values())

    @property
    def unanswerable_count(self) -> int:
        return sum(self.unanswerable.values())

    def share(self, *verdicts: str) -> float | None:
        pool = self.answerable if verdicts[0] in ANSWERABLE_VERDICTS else self.unanswerable
        total = sum(pool.values())
        return sum(pool[v] for v in verdicts) / total if total else None


@dataclass(frozen=True)
class ScoredQuestion:
    question: Question
    verdict: str
    outcome: str | None
    reply: str
    cited: tuple[str, ...]


def figures_by_language(scored: Sequence[ScoredQuestion]) -> list[LanguageFigures]:
    """Per language, then over all of them (language `all`)."""
    by_language: dict[str, LanguageFigures] = {}
    every = LanguageFigures("all")
    for row in scored:
        own = by_language.setdefault(row.question.language, LanguageFigures(row.question.language))
        for figures in (own, every):
            pool = figures.answerable if row.question.answerable else figures.unanswerable
            pool[row.verdict] += 1
    return [by_language[language] for language in sorted(by_language)] + [every]


def answers_settings(settings: Settings, database: Path, store: Path, collection: str) -> Settings:
    """The configured settings over a scratch SQLite database and the eval's store and
    collection, with tracing off."""
    return settings.model_copy(
        update={
            "db": settings.db.model_copy(update={"url": f"sqlite:///{database}"}),
            "knowledge": settings.knowledge.model_copy(
                update={"qdrant_path": store, "qdrant_url": None, "collection": collection}
            ),
            "langfuse": settings.langfuse.model_copy(
                update={"public_key": None, "secret_key": None}
            ),
        }
    )


@contextmanager
def scratch_runtime(settings: Settings, store: Path, collection: str) -> Iterator["Runtime"]:
    """The service's `Runtime` over a scratch SQLite database (migrated, gone on exit) and
    `collection` of the store; the caller closes it (`aclose`) on its event loop."""
    from app.runtime import Runtime

    with TemporaryDirectory(prefix="supportbot-answers-") as scratch:
        database = Path(scratch) / "answers.sqlite"
        migrate.upgrade(f"sqlite:///{database}")
        yield Runtime.from_settings(answers_settings(settings, database, store, collection))


def run_question_set(
    settings: Settings,
    folder: Path,
    questions: Sequence[Question],
    *,
    store: Path,
    collection: str,
    on_ingested: Callable[[IngestReport], None] | None = None,
    on_question: Callable[[], None] | None = None,
) -> list[ScoredQuestion]:
    """Ingest `folder` into `collection` of the store (unchanged files are skipped), then
    ask every question as the first message of a client conversation of its own."""
    with scratch_runtime(settings, store, collection) as runtime:

        async def ask_all() -> list[ScoredQuestion]:
            try:
                report = runtime.knowledge.ingest(folder)
                if on_ingested:
                    on_ingested(report)
                return [
                    await ask(runtime, f"answers-{number}", question, on_question)
                    for number, question in enumerate(questions, start=1)
                ]
            finally:
                await runtime.aclose()

        return asyncio.run(ask_all())


async def ask(
    runtime: "Runtime",
    conversation_key: str,
    question: Question,
    on_question: Callable[[], None] | None = None,
) -> ScoredQuestion:
    """`question` as the first message of the client conversation `conversation_key`,
    scored."""
    reply: TurnReply = await runtime.chat.handle_turn(
        TurnRequest(
            channel="api",
            conversation_key=conversation_key,
            audience="client",
            author="Customer",
            text=question.text,
        )
    )
    if on_question:
        on_question()
    return ScoredQuestion(
        question,
        verdict(question, reply),
        reply.outcome,
        reply.text,
        tuple(citation.source for citation in reply.citations),
    )
