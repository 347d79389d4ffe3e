"""Where "not in the documentation" starts: the dense similarity below which a search's
passages are not relevant (`SUPPORTBOT_KNOWLEDGE__MIN_SIMILARITY`, per embedder).

`calibrate` takes the best similarity a search finds for questions the documentation
answers and for questions it does not, and picks the highest threshold that refuses at
most `max_refused` of the answerable ones: answering an unanswerable question from a
loosely related page is the lesser harm than refusing one the manual answers.
`supportbot kb calibrate` runs it on a collection; `supportbot eval decisions` reports
the chosen threshold on held-out questions."""

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from knowledge.types import Retriever


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
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
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
