"""Saved answers matched, on the calibration set: `supportbot eval matching`.

How the bot matches a question to a saved team answer (`knowledge.team_answers`,
`knowledge.evidence`) is chosen on this set (evals/loop/calibration.yaml: team answers on
topics the sample knowledge base does not cover, the questions customers ask later and
negatives near them), and reported on another (`supportbot eval loop`, evals/loop.py).

Over a fresh database and a store of its own (`evals.own_docs.scratch_runtime`): the
documentation folder is ingested, every answer saved through
`app.answers.service.AnswerService` (what `/v1/answers` uses), then every question asked as
the first message of a client conversation of its own. A question on an answer is
**found** when its reply quotes that answer (cites `answers/<its id>`, outcome not
`not_found`) and holds its fact; **another** when it quotes another saved answer; a
negative **quotes** when its reply quotes any saved answer. Replies offering a saved
answer as possibly related (an unsure reply) are counted apart. A `near` negative is
**from the docs** when its reply cites its page and is not unsure.
"""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.answers.service import AnswerDraft, AnswerService
from app.settings import Settings
from evals.own_docs import Answer, Question, ScoredQuestion, ask, folded, scratch_runtime
from knowledge.team_answers import is_team_answer, source_of
from knowledge.yaml_files import read_yaml

CALIBRATION = Path(__file__).parent / "loop" / "calibration.yaml"
# How a question relates to the saved answers; the negatives' kinds after the answers'.
ON_ANSWERS = ("reworded", "saved_language", "other_language")
NEGATIVES = ("near", "near_unanswered", "unrelated")


@dataclass(frozen=True)
class SavedAnswer:
    topic: str
    language: str
    question: str
    variants: tuple[str, ...]
    answer: str
    fact: str


@dataclass(frozen=True)
class Asked:
    """A question of the set: `kind` one of `ON_ANSWERS` or `NEGATIVES`; `topic` the answer
    it is on (or near)."""

    question: Question
    kind: str
    topic: str = ""


@dataclass(frozen=True)
class MatchingSet:
    answers: tuple[SavedAnswer, ...]
    asked: tuple[Asked, ...]


def load_matching_set(path: Path) -> MatchingSet:
    data = read_yaml(path)
    answers: list[SavedAnswer] = []
    asked: list[Asked] = []
    for item in data["answers"]:
        saved = SavedAnswer(
            item["topic"],
            item["language"],
            item["question"],
            tuple(item.get("variants") or ()),
            item["answer"],
            item["fact"],
        )
        if folded(saved.fact) not in folded(saved.answer):
            raise ValueError(f"{path}: the fact of {saved.topic!r} is not in its answer")
        answers.append(saved)
        for question in item["asked"]:
            own = Question(question["text"], question["language"])
            asked.append(Asked(own, question["wording"], saved.topic))
    for kind in NEGATIVES:
        for item in data["negatives"].get(kind) or []:
            pages = (Answer(item["page"], ()),) if item.get("page") else ()
            question = Question(item["text"], item["language"], pages)
            asked.append(Asked(question, kind, item.get("topic", "")))
    return MatchingSet(tuple(answers), tuple(asked))


@dataclass(frozen=True)
class Matched:
    asked: Asked
    scored: ScoredQuestion
    quoted: str | None  # the topic of the saved answer the reply quotes
    offered: bool  # an unsure reply lists a saved answer


def _matched(asked: Asked, scored: ScoredQuestion, topic_of: dict[str, str]) -> Matched:
    saved = [topic_of.get(source, source) for source in scored.cited if is_team_answer(source)]
    unsure = scored.outcome == "not_found"
    return Matched(
        asked, scored, saved[0] if saved and not unsure else None, bool(saved) and unsure
    )


def run_matching(
    settings: Settings,
    folder: Path,
    matching: MatchingSet,
    *,
    store: Path,
    collection: str,
    on_question: Callable[[], None] | None = None,
) -> list[Matched]:
    """The set's answers saved over `folder` ingested into `collection` of `store`, then
    its questions asked."""
    with scratch_runtime(settings, store, collection) as runtime:

        async def play() -> list[Matched]:
            try:
                runtime.knowledge.ingest(folder)
                service = AnswerService(
                    runtime.sessions,
                    runtime.knowledge,
                    collection=collection,
                    language=settings.knowledge.language,
                )
                topic_of = {}
                for saved in matching.answers:
                    draft = AnswerDraft(
                        saved.question, saved.answer, saved.variants, (saved.language,)
                    )
                    row = await service.create(draft)
                    topic_of[source_of(row.id)] = saved.topic
                matched = []
                for number, asked in enumerate(matching.asked, start=1):
                    scored = await ask(runtime, f"matching-{number}", asked.question, on_question)
                    matched.append(_matched(asked, scored, topic_of))
                return matched
            finally:
                await runtime.aclose()

        return asyncio.run(play())


def found(row: Matched, answers: dict[str, SavedAnswer]) -> bool:
    saved = answers.get(row.asked.topic)
    return (
        saved is not None
        and row.quoted == saved.topic
        and folded(saved.fact) in folded(row.scored.reply)
    )


def from_the_docs(row: Matched) -> bool:
    """Answered, citing the page that answers it, quoting no saved answer."""
    cited = set(row.scored.cited) & row.asked.question.pages
    return bool(cited) and row.quoted is None and row.scored.outcome != "not_found"


def matching_figures(rows: list[Matched], matching: MatchingSet) -> dict[str, dict[str, int]]:
    """Per kind of question: how many were asked, found (questions on an answer), quoted
    another answer or any (negatives), offered one, and answered from their page (near)."""
    answers = {saved.topic: saved for saved in matching.answers}
    figures: dict[str, dict[str, int]] = {}
    for kind in (*ON_ANSWERS, *NEGATIVES):
        own = [row for row in rows if row.asked.kind == kind]
        counts: dict[str, Any] = {"asked": len(own), "offered": sum(r.offered for r in own)}
        if kind in ON_ANSWERS:
            counts["found"] = sum(found(r, answers) for r in own)
            counts["another"] = sum(bool(r.quoted) and r.quoted != r.asked.topic for r in own)
        else:
            counts["quoted"] = sum(bool(r.quoted) for r in own)
        if kind == "near":
            counts["from the docs"] = sum(from_the_docs(r) for r in own)
        figures[kind] = counts
    return figures
