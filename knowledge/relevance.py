"""Where "not in the documentation" starts: the dense similarity below which a search's
passages are not relevant (`SUPPORTBOT_KNOWLEDGE__MIN_SIMILARITY`, per embedder and per
query language).

`calibrate` takes the best similarity a search finds for questions the documentation
answers and for questions it does not, and picks the highest threshold that refuses at
most `max_refused` of the answerable ones: answering an unanswerable question from a
loosely related page is the lesser harm than refusing one the manual answers.

Similarities are on another scale for each query language: a question in the
documentation's language finds passages worded like it, one in another language only
their meaning (on the GnuCash manuals, English and German, a Russian question's best
similarities sit ~0.05 lower). So a threshold is chosen per language with enough labelled
questions, and one over all of them for the rest. `supportbot kb calibrate` runs it on a
collection; `supportbot eval decisions` reports the chosen thresholds on held-out
questions."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from knowledge.language import identify
from knowledge.types import Retriever

ANY_LANGUAGE = ""  # the key of the threshold over every language
# Fewer answerable questions than this in a language and its threshold would rest on one
# or two of them (5% of 20 is one): the language gets the threshold over all of them.
MIN_ANSWERABLE_PER_LANGUAGE = 20


@dataclass(frozen=True)
class RelevanceThresholds:
    """The threshold for a query: its language's, else the one over every language."""

    default: float = 0.0
    by_language: Mapping[str, float] = field(default_factory=dict)
    documentation_language: str = "en"  # what a query too short to tell is taken for
    # Below the threshold, from where a passage's page may still be offered as possibly
    # related (the collection's calibration makes both); None: the threshold itself.
    related: "RelevanceThresholds | None" = None

    def for_query(self, query: str) -> float:
        if not self.by_language:
            return self.default
        guess = identify(query, (self.documentation_language,), self.documentation_language)
        return self.by_language.get(guess.language, self.default)

    def related_for_query(self, query: str) -> float:
        return (self.related or self).for_query(query)


@dataclass(frozen=True)
class LabelledQuestion:
    text: str
    answerable: bool
    language: str = "en"


@dataclass(frozen=True)
class Calibration:
    threshold: float
    answerable: int
    refused: int  # answerable questions below the threshold
    unanswerable: int
    caught: int  # unanswerable questions below the threshold

    @property
    def refused_share(self) -> float:
        return self.refused / self.answerable if self.answerable else 0.0

    @property
    def caught_share(self) -> float:
        return self.caught / self.unanswerable if self.unanswerable else 0.0


def load_questions(path: Path) -> list[LabelledQuestion]:
    """Questions labelled `docs: answerable | unanswerable` (a `questions:` or `messages:`
    list; others are skipped)."""
    from knowledge.yaml_files import read_yaml  # the settings import this module

    data = read_yaml(path)
    items = data.get("questions") or data.get("messages") or []
    return [
        LabelledQuestion(item["text"], item["docs"] == "answerable", item.get("language", "en"))
        for item in items
        if item.get("docs") in ("answerable", "unanswerable")
    ]


def best_similarity(retriever: Retriever, text: str, k: int = 4) -> float:
    """The best dense similarity of a search for `text` (0.0 when nothing came back)."""
    return max((passage.similarity for passage in retriever.search(text, k)), default=0.0)


def outcome_at(threshold: float, scored: Iterable[tuple[LabelledQuestion, float]]) -> Calibration:
    rows = list(scored)
    answerable = [best for question, best in rows if question.answerable]
    unanswerable = [best for question, best in rows if not question.answerable]
    return Calibration(
        threshold,
        len(answerable),
        sum(best < threshold for best in answerable),
        len(unanswerable),
        sum(best < threshold for best in unanswerable),
    )


def calibrate(
    scored: list[tuple[LabelledQuestion, float]], max_refused: float = 0.05
) -> Calibration:
    """The highest threshold (one of the answerable questions' best similarities) that
    refuses at most `max_refused` of them."""
    answerable = sorted(best for question, best in scored if question.answerable)
    if not answerable:
        raise ValueError("calibrating needs answerable questions")
    may_refuse = int(max_refused * len(answerable))
    return outcome_at(answerable[may_refuse], scored)


def calibrate_by_language(
    scored: list[tuple[LabelledQuestion, float]],
    max_refused: float = 0.05,
    min_answerable: int = MIN_ANSWERABLE_PER_LANGUAGE,
) -> dict[str, Calibration]:
    """`calibrate` over every question (key `ANY_LANGUAGE`) and over each language with at
    least `min_answerable` answerable questions."""
    chosen = {ANY_LANGUAGE: calibrate(scored, max_refused)}
    for language in sorted({question.language for question, _ in scored}):
        own = [(question, best) for question, best in scored if question.language == language]
        if sum(question.answerable for question, _ in own) >= min_answerable:
            chosen[language] = calibrate(own, max_refused)
    return chosen
