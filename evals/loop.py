"""The loop measured: `supportbot eval loop --kb FOLDER --week FILE`.

Does an unanswered question, once the support team has answered it, get answered for the
next customer? A week file (evals/loop/) holds the gap topics the documentation does not
answer, each with the answer a support person would save and a fact of it, the questions
customers ask on two days, and controls asked on both days.

Over a fresh database and a store of its own (`evals.own_docs.scratch_runtime`):

1. **Day 1.** Every day-1 question is the first message of a client conversation of its
   own, through the service's `Runtime` with the configured settings (the shipped
   defaults: the offline model); then the Insights figures of the day, as the staff page
   gets them: the resolution rate (`app.insights.outcomes.outcome_report`, per language
   by the conversations' key prefix) and the knowledge-gap report's groups.
2. **The team answers.** Going down the gap report, a group on one of the week's gap topics
   is answered as Insights' "Write the answer" prefills it: its first question of the topic
   as the question, its other ones as wordings, the week's answer text in the topic's
   language, saved through `app.answers.service.AnswerService` (what `/v1/answers` uses).
   A group's questions on nothing the team answers (a control) are left out of the form;
   a group on a topic already answered adds its questions to that answer's wordings; a
   group on no gap topic is passed over.
3. **Day 2.** Every day-1 gap question again, the new wordings (in the answer's language:
   reworded; in another: other-language) and the controls, asked the same way.

A gap question is **resolved** when its reply holds the topic's fact (`folded`, as
`eval answers` matches facts) and cites a support team answer. A control citing a saved
answer is a mistake of the loop; an answerable control is unchanged when its outcome and
verdict (`evals.own_docs.verdict`) are the same on both days.
"""

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.answers.service import AnswerDraft, AnswerService
from app.insights.gaps import GapGroup, reporter_for
from app.insights.outcomes import outcome_report
from app.settings import Settings
from evals.own_docs import Question, ScoredQuestion, ask, folded, question_of, scratch_runtime
from knowledge.team_answers import is_team_answer
from knowledge.yaml_files import read_yaml

if TYPE_CHECKING:
    from app.runtime import Runtime

WEEK = Path(__file__).parent / "loop" / "week.yaml"
DAYS = (1, 2)
# How a day-2 gap question relates to what was saved.
WORDINGS = ("asked", "again", "reworded", "other_language")
REPORT_GROUPS = 100  # the gap report's page: the largest the API serves


@dataclass(frozen=True)
class GapTopic:
    name: str
    language: str  # the staff answer's
    answer: str
    fact: str
    day1: tuple[Question, ...]
    day2: tuple[Question, ...]  # the new wordings; the day-1 ones are asked again too


@dataclass(frozen=True)
class Week:
    corpus: str
    gaps: tuple[GapTopic, ...]
    answerable: tuple[Question, ...]
    unrelated: tuple[Question, ...]


@dataclass(frozen=True)
class Asked:
    """A question of the day with what it is: `kind` gap, answerable or unrelated; a gap
    question's topic and wording (`WORDINGS`)."""

    question: Question
    kind: str
    topic: GapTopic | None = None
    wording: str = ""


def _questions(items: Iterable[dict[str, Any]]) -> tuple[Question, ...]:
    return tuple(question_of(item) for item in items)


def load_week(path: Path) -> Week:
    data = read_yaml(path)
    gaps = tuple(
        GapTopic(
            name=item["topic"],
            language=item["language"],
            answer=item["answer"],
            fact=item["fact"],
            day1=_questions(item["day1"]),
            day2=_questions(item.get("day2") or []),
        )
        for item in data["gaps"]
    )
    for topic in gaps:
        if folded(topic.fact) not in folded(topic.answer):
            raise ValueError(f"{path}: the fact of {topic.name!r} is not in its answer")
    controls = data.get("controls") or {}
    answerable = _questions(controls.get("answerable") or [])
    if any(not question.answerable for question in answerable):
        raise ValueError(f"{path}: an answerable control without answers")
    return Week(
        str(data.get("corpus") or path.stem),
        gaps,
        answerable,
        _questions(controls.get("unrelated") or []),
    )


def day_questions(week: Week, day: int) -> list[Asked]:
    """What customers ask on `day`: the gap questions, then the controls."""
    gap: list[Asked] = []
    for topic in week.gaps:
        gap += [Asked(q, "gap", topic, "asked" if day == 1 else "again") for q in topic.day1]
        for question in topic.day2 if day == 2 else ():
            same = question.language == topic.language
            gap.append(Asked(question, "gap", topic, "reworded" if same else "other_language"))
    return [
        *gap,
        *(Asked(question, "answerable") for question in week.answerable),
        *(Asked(question, "unrelated") for question in week.unrelated),
    ]


@dataclass(frozen=True)
class Served:
    asked: Asked
    scored: ScoredQuestion

    @property
    def cites_team_answer(self) -> bool:
        """A saved answer is among the reply's citations: quoted, or offered as possibly
        related by an unsure reply (outcome `not_found`)."""
        return any(is_team_answer(source) for source in self.scored.cited)

    @property
    def quotes_team_answer(self) -> bool:
        return self.cites_team_answer and self.scored.outcome != "not_found"

    @property
    def resolved(self) -> bool:
        topic = self.asked.topic
        return (
            topic is not None
            and self.cites_team_answer
            and folded(topic.fact) in folded(self.scored.reply)
        )


@dataclass(frozen=True)
class Insights:
    """A day's figures on the Insights page: the resolution rate per language (and `all`)
    and the gap report's groups."""

    resolution: dict[str, float | None]
    groups: list[GapGroup]


@dataclass(frozen=True)
class Saved:
    """What the team did with one gap report group."""

    group: str  # its name, the most central question
    topic: str | None  # None: on no gap topic, passed over
    answer_id: int | None
    questions: tuple[str, ...]  # saved as the question or wordings
    left_out: tuple[str, ...]  # the group's questions on no topic the team answered
    added: bool  # a new answer (else wordings added to the topic's)


@dataclass(frozen=True)
class LoopRun:
    days: dict[int, list[Served]]
    insights: dict[int, Insights]
    saved: list[Saved]


def conversation_prefix(day: int, language: str = "") -> str:
    return f"loop-{day}-{language}-" if language else f"loop-{day}-"


async def _serve(
    runtime: "Runtime", day: int, asked: Sequence[Asked], on_question: Callable[[], None] | None
) -> list[Served]:
    served = []
    for number, item in enumerate(asked, start=1):
        key = f"{conversation_prefix(day, item.question.language)}{number}"
        served.append(Served(item, await ask(runtime, key, item.question, on_question)))
    return served


async def _insights(
    runtime: "Runtime", day: int, languages: Iterable[str], since: datetime
) -> Insights:
    until = datetime.now(UTC) + timedelta(seconds=1)
    reporter = reporter_for(runtime.settings, runtime.sessions)
    resolution = {}
    for language in [*languages, ""]:
        prefix = conversation_prefix(day, language)
        failed = await reporter.unresolved(since, until, prefix)
        async with runtime.sessions() as session:
            report = await outcome_report(session, since, until, prefix, failed)
        resolution[language or "all"] = report.resolution_rate
    gaps = await reporter.report(since, until, conversation_prefix(day), limit=REPORT_GROUPS)
    return Insights(resolution, gaps.groups)


async def answer_gaps(
    service: AnswerService, groups: Sequence[GapGroup], week: Week, top: int | None = None
) -> list[Saved]:
    """The team going down the gap report (its first `top` groups; None: all of them) and
    answering each group on a gap topic, as the module docstring says."""
    topic_of = {q.text: topic for topic in week.gaps for q in (*topic.day1, *topic.day2)}
    answered: dict[str, tuple[int, list[str]]] = {}  # topic name: answer id, its wordings
    saved = []
    for group in groups[:top]:
        questions = [turn.question for turn in group.examples]
        named = Counter(topic_of[q].name for q in questions if q in topic_of)
        if not named:
            saved.append(Saved(group.name, None, None, (), tuple(questions), False))
            continue
        name = named.most_common(1)[0][0]
        topic = next(topic for topic in week.gaps if topic.name == name)
        own = [q for q in questions if q in topic_of and topic_of[q] is topic]
        left_out = tuple(q for q in questions if q not in own)
        if name in answered:
            answer_id, wordings = answered[name]
            wordings += own
            await service.update(answer_id, {"variants": wordings})
            saved.append(Saved(group.name, name, answer_id, tuple(own), left_out, False))
            continue
        draft = AnswerDraft(own[0], topic.answer, own[1:], (topic.language,), author="loop")
        row = await service.create(draft)
        answered[name] = (row.id, own[1:])
        saved.append(Saved(group.name, name, row.id, tuple(own), left_out, True))
    return saved


def run_loop(
    settings: Settings,
    folder: Path,
    week: Week,
    *,
    store: Path,
    collection: str,
    top: int | None = None,
    on_ingested: Callable[[], None] | None = None,
    on_question: Callable[[], None] | None = None,
) -> LoopRun:
    """Day 1, the team's answers, day 2, over `folder` ingested into `collection` of
    `store` (the loop's own: the answers are written into it) and a scratch database."""
    languages = sorted(
        {asked.question.language for day in DAYS for asked in day_questions(week, day)}
    )
    with scratch_runtime(settings, store, collection) as runtime:

        async def play() -> LoopRun:
            try:
                runtime.knowledge.ingest(folder)
                if on_ingested:
                    on_ingested()
                days: dict[int, list[Served]] = {}
                insights: dict[int, Insights] = {}
                saved: list[Saved] = []
                for day in DAYS:
                    started = datetime.now(UTC)
                    days[day] = await _serve(runtime, day, day_questions(week, day), on_question)
                    insights[day] = await _insights(runtime, day, languages, started)
                    if day == 1:
                        service = AnswerService(
                            runtime.sessions,
                            runtime.knowledge,
                            collection=collection,
                            language=settings.knowledge.language,
                        )
                        saved = await answer_gaps(service, insights[day].groups, week, top)
                return LoopRun(days, insights, saved)
            finally:
                await runtime.aclose()

        return asyncio.run(play())


@dataclass(frozen=True)
class LoopFigures:
    """One language's (or `all`) figures; each pair is (resolved, asked)."""

    language: str
    day1: tuple[int, int]
    again: tuple[int, int]
    reworded: tuple[int, int]
    other_language: tuple[int, int]
    resolution_before: float | None
    resolution_after: float | None
    day2_quoting_saved: int  # day-2 replies quoting a saved answer
    day2_offering_saved: int  # … offering one as possibly related, unsure
    day2_replies: int
    controls_quoting_saved: int  # day 1 and day 2; must be 0
    controls_offering_saved: int
    controls: int
    answerable_unchanged: tuple[int, int]


def _resolved(served: Iterable[Served], wording: str) -> tuple[int, int]:
    rows = [row for row in served if row.asked.wording == wording]
    return sum(row.resolved for row in rows), len(rows)


def loop_figures(run: LoopRun) -> list[LoopFigures]:
    """Per language of the questions, then over all of them (language `all`)."""
    languages = sorted({row.asked.question.language for rows in run.days.values() for row in rows})
    figures = []
    for language in [*languages, "all"]:

        def of(day: int, language: str = language) -> list[Served]:
            return [
                row for row in run.days[day] if language in ("all", row.asked.question.language)
            ]

        day1, day2 = of(1), of(2)
        controls = [row for row in day1 + day2 if row.asked.kind != "gap"]
        before = {row.asked.question.text: row.scored for row in day1}
        answerable = [row for row in day2 if row.asked.kind == "answerable"]
        unchanged = sum(
            (before[row.asked.question.text].outcome, before[row.asked.question.text].verdict)
            == (row.scored.outcome, row.scored.verdict)
            for row in answerable
        )
        figures.append(
            LoopFigures(
                language=language,
                day1=_resolved(day1, "asked"),
                again=_resolved(day2, "again"),
                reworded=_resolved(day2, "reworded"),
                other_language=_resolved(day2, "other_language"),
                resolution_before=run.insights[1].resolution.get(language),
                resolution_after=run.insights[2].resolution.get(language),
                day2_quoting_saved=sum(row.quotes_team_answer for row in day2),
                day2_offering_saved=sum(
                    row.cites_team_answer and not row.quotes_team_answer for row in day2
                ),
                day2_replies=len(day2),
                controls_quoting_saved=sum(row.quotes_team_answer for row in controls),
                controls_offering_saved=sum(
                    row.cites_team_answer and not row.quotes_team_answer for row in controls
                ),
                controls=len(controls),
                answerable_unchanged=(unchanged, len(answerable)),
            )
        )
    return figures


def mistakes(run: LoopRun) -> list[Served]:
    """Replies citing a saved answer they should not: a control's, quoted or offered, and a
    gap question's quoting one without its topic's fact (another topic's answer)."""
    return [
        row
        for rows in run.days.values()
        for row in rows
        if (row.asked.kind != "gap" and row.cites_team_answer)
        or (row.quotes_team_answer and not row.resolved)
    ]
