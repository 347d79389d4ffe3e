"""How the answers read: `supportbot eval answers` plays scenarios once each and scores them.

Each scenario is played once through the real `ChatService` (`evals.runner.run_profile`)
under the profile its audience gets, with the configured model (offline by default, in
the service's own shape unless `searches_per_question` says otherwise). Three figures:

- **told "not in the docs"**: of the turns no page of the manuals answers (kind
  `needs_web`, `unanswerable` or `out_of_scope`), the share whose answer says the
  documentation does not cover it (`says_not_found`);
- **answerable refused**: of the turns with gold pages, the share answered that way;
- **fact coverage**: per turn with facts, the share of its facts at least 60% of whose
  words (`evals.words.fact_words`, the metrics' own word list) appear in the answer;
  averaged over those turns. The same figure as the `eval run` table's (`evals.metrics`).

Beside them: greetings answered without a search (kind `smalltalk`) and the answers'
mean length in words, so that coverage cannot grow by answering at length unnoticed.
"""

import asyncio
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel

from app.settings import Settings
from evals.harness import EvalConfig, eval_settings
from evals.metrics import Pricing, TurnRow, turn_rows
from evals.runner import run_profile
from evals.scenario import Scenario, load_scenario
from knowledge.types import Retriever

UNANSWERABLE_KINDS = frozenset({"needs_web", "unanswerable", "out_of_scope"})
SMALLTALK_KIND = "smalltalk"

# How an answer says the documentation does not cover the question (en, de, ru).
_NOT_FOUND = re.compile(
    r"(?:could not|couldn't|can't|cannot|did not|didn't) find|not (?:covered|in the "
    r"(?:documentation|knowledge base|docs))|nicht in der Dokumentation|nichts gefunden|"
    r"не наш(?:ёл|ел|ла)",
    re.IGNORECASE,
)


def says_not_found(answer: str) -> bool:
    return bool(_NOT_FOUND.search(answer))


@dataclass(frozen=True)
class AnswerFigures:
    scenario: str
    turns: int
    unanswerable: int
    unanswerable_told_not_found: float | None
    answerable: int
    answerable_refused: float | None
    fact_coverage: float | None
    smalltalk: int
    smalltalk_without_search: float | None
    mean_answer_words: float


def _share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def answer_figures(scenario: str, rows: Sequence[TurnRow]) -> AnswerFigures:
    unanswerable = [says_not_found(r.answer) for r in rows if r.kind in UNANSWERABLE_KINDS]
    answerable = [says_not_found(r.answer) for r in rows if r.gold_hit is not None]
    coverage = [r.fact_coverage for r in rows if r.fact_coverage is not None]
    smalltalk = [r.searches == 0 for r in rows if r.kind == SMALLTALK_KIND]
    return AnswerFigures(
        scenario=scenario,
        turns=len(rows),
        unanswerable=len(unanswerable),
        unanswerable_told_not_found=_share(unanswerable),
        answerable=len(answerable),
        answerable_refused=_share(answerable),
        fact_coverage=statistics.fmean(coverage) if coverage else None,
        smalltalk=len(smalltalk),
        smalltalk_without_search=_share(smalltalk),
        mean_answer_words=statistics.fmean(len(r.answer.split()) for r in rows) if rows else 0,
    )


def play_scenario(
    settings: Settings,
    config: EvalConfig,
    retriever: Retriever,
    model: BaseChatModel,
    on_turn: Callable[[], None] | None = None,
) -> tuple[Scenario, list[TurnRow]]:
    """`config.scenario` once, under the profile its audience gets; one row per turn."""
    scenario = load_scenario(config.scenario)
    settings = eval_settings(settings, config)
    profile = settings.profiles.by_audience[scenario.audience]
    run = asyncio.run(
        run_profile(
            settings,
            scenario,
            profile,
            model,
            retriever,
            provider_rules=config.provider_rules,
            on_turn=on_turn,
        )
    )
    return scenario, turn_rows(run, scenario, Pricing(settings.observability))
