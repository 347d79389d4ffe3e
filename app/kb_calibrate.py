"""`supportbot kb calibrate`: thresholds (and the documentation's scope) chosen on labelled
questions of a collection, printed as the settings that set them; by set, each questions
file held out in turn."""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.kb_support import (
    fail,
    load_settings,
    open_knowledge_base,
    require_collection,
    rich_console,
)

if TYPE_CHECKING:
    from rich.console import Console

    from app.settings import KnowledgeSettings
    from knowledge.relevance import Calibration, LabelledQuestion


def run_calibrate(
    questions: Annotated[
        list[Path],
        typer.Option(
            help="YAML of this collection's questions labelled `docs: answerable | "
            "unanswerable` (`supportbot insights questions` writes them); repeat for several"
        ),
    ],
    max_refused: Annotated[
        float, typer.Option(min=0, max=1, help="share of answerable questions it may refuse")
    ] = 0.05,
    scope: Annotated[
        bool,
        typer.Option(
            help="also fit the documentation's scope to the questions (knowledge/scope.py): "
            "the thresholds then take 40% of MAX_REFUSED, the scope's cut the rest"
        ),
    ] = False,
    by_set: Annotated[
        bool,
        typer.Option(
            help="with --scope: instead, hold each questions file out in turn, choose the "
            "thresholds and the cut on the others and report what they do on it (how the "
            "scope's neighbours were chosen)"
        ),
    ] = False,
    neighbours: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="with --by-set: the nearest questions of each kind compared (default: the "
            "service's, knowledge/scope.py)",
        ),
    ] = None,
) -> None:
    """Choose the relevance thresholds of the configured embedder on the configured
    collection: per query language with enough answerable questions, and over all of them,
    the highest similarity that refuses at most MAX_REFUSED of the answerable questions;
    with --scope, the scope's cut as well. Prints the settings to use."""
    if by_set and not (scope and len(questions) > 1):
        fail("--by-set holds each questions file out in turn: give --scope and two or more", 2)
    from knowledge.relevance import (
        best_similarity,
        calibrate_by_language,
        load_questions,
    )
    from knowledge.scope import NEIGHBOURS, THRESHOLDS_SHARE, documentation_scope

    console = rich_console()
    knowledge = load_settings().knowledge
    read = [(path, question) for path in questions for question in load_questions(path)]
    labelled = [question for _, question in read]
    with open_knowledge_base() as kb:
        require_collection(kb, kb.collection)
        scored = [(question, best_similarity(kb, question.text)) for question in labelled]
        # The scope's own vectors, kept where the service's scope finds them.
        fitted = knowledge.model_copy(update={"scope_questions": questions})
        scoped = documentation_scope(fitted, kb.embedder) if scope else None
        vectors = scoped.vectors() if scoped else None
    embedder = knowledge.embedder
    thresholds_share = max_refused * (THRESHOLDS_SHARE if scope else 1.0)
    if by_set and vectors is not None:
        files = [path for path, _ in read]
        _print_scope_by_set(
            console, files, scored, vectors, knowledge, max_refused, neighbours or NEIGHBOURS
        )
        return
    by_language = calibrate_by_language(scored, thresholds_share)
    setting = _similarity_setting(embedder, by_language)
    for key, chosen in zip(setting, by_language.values(), strict=True):
        console.print(
            f"{key}: threshold {chosen.threshold:.3f} refuses {chosen.refused} of "
            f"{chosen.answerable} answerable questions ({chosen.refused_share:.0%}) and tells "
            f'{chosen.caught} of {chosen.unanswerable} unanswerable ones "not in the docs" '
            f"({chosen.caught_share:.0%})"
        )
    console.print(
        f"SUPPORTBOT_KNOWLEDGE__MIN_SIMILARITY='{json.dumps(setting)}'",
        highlight=False,
        soft_wrap=True,
    )
    if vectors is not None:
        thresholds = knowledge.model_copy(update={"min_similarity": setting})
        _print_scope(console, questions, scored, vectors, thresholds, max_refused)


def _print_scope(
    console: "Console",
    questions: list[Path],
    scored: "list[tuple[LabelledQuestion, float]]",
    vectors: Any,
    knowledge: "KnowledgeSettings",
    max_refused: float,
) -> None:
    """The scope's cut beside the thresholds just chosen (`knowledge.min_similarity`), and
    the settings to use."""
    from knowledge.scope import FOLDS, calibrate_scope

    thresholds = knowledge.relevance_thresholds
    answerable = [question.answerable for question, _ in scored]
    refused_anyway = [best < thresholds.for_query(question.text) for question, best in scored]
    chosen = calibrate_scope(vectors, answerable, refused_anyway, max_refused)
    console.print(
        f"scope: cut {chosen.cut:.3f}; with the thresholds, held out in {FOLDS} folds, refuses "
        f"{chosen.refused} of {chosen.answerable} answerable questions and tells "
        f'{chosen.caught} of {chosen.unanswerable} unanswerable ones "not in the docs"'
    )
    files = json.dumps([str(path) for path in questions])
    console.print(
        f"SUPPORTBOT_KNOWLEDGE__SCOPE_QUESTIONS='{files}'", highlight=False, soft_wrap=True
    )
    console.print(
        f"SUPPORTBOT_KNOWLEDGE__SCOPE_CUT={chosen.cut:.3f}", highlight=False, soft_wrap=True
    )


def _similarity_setting(embedder: str, chosen: "dict[str, Calibration]") -> dict[str, float]:
    """The thresholds chosen per language as `SUPPORTBOT_KNOWLEDGE__MIN_SIMILARITY` holds
    them: the embedder's own over every language, `embedder:language` for each language."""
    from knowledge.relevance import ANY_LANGUAGE

    return {
        (f"{embedder}:{language}" if language != ANY_LANGUAGE else embedder): round(
            calibration.threshold, 3
        )
        for language, calibration in chosen.items()
    }


def _print_scope_by_set(
    console: "Console",
    files: list[Path],
    scored: "list[tuple[LabelledQuestion, float]]",
    vectors: Any,
    knowledge: "KnowledgeSettings",
    max_refused: float,
    neighbours: int,
) -> None:
    """Each file held out in turn: the thresholds and the cut chosen on the other files as
    `kb calibrate --scope` chooses them, then applied to the file's questions."""
    import numpy as np
    from rich.table import Table

    from knowledge.relevance import calibrate_by_language
    from knowledge.scope import THRESHOLDS_SHARE, NearestQuestions, calibrate_scope

    held_files = np.array([str(path) for path in files])
    answerable = np.array([question.answerable for question, _ in scored])
    table = Table(
        "held out", "cut", "answerable refused", '"not in the docs"', title="scope, by set"
    )
    totals = np.zeros(4, dtype=int)
    for name in dict.fromkeys(held_files):
        held = held_files == name
        others = [pair for pair, kept in zip(scored, ~held, strict=True) if kept]
        chosen = calibrate_by_language(others, max_refused * THRESHOLDS_SHARE)
        setting = _similarity_setting(knowledge.embedder, chosen)
        thresholds = knowledge.model_copy(update={"min_similarity": setting}).relevance_thresholds
        below = np.array([best < thresholds.for_query(q.text) for q, best in scored])
        cut = calibrate_scope(
            vectors[~held], answerable[~held], below[~held], max_refused, neighbours
        ).cut
        nearest = NearestQuestions(vectors[~held], answerable[~held], neighbours)
        refused = below[held] | (nearest.margins(vectors[held]) > cut)
        covered = answerable[held]
        counts = np.array(
            [(refused & covered).sum(), covered.sum(), (refused & ~covered).sum(), (~covered).sum()]
        )
        totals += counts
        table.add_row(Path(name).name, f"{cut:.3f}", *_shares(counts))
    table.add_row("all", "", *_shares(totals))
    console.print(table)


def _shares(counts: Any) -> list[str]:
    refused, answerable, caught, unanswerable = (int(count) for count in counts)
    return [
        f"{refused}/{answerable} ({refused / max(answerable, 1):.1%})",
        f"{caught}/{unanswerable} ({caught / max(unanswerable, 1):.1%})",
    ]
