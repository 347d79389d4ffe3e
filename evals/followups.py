"""`supportbot eval follow-ups`: how the Insights rule that marks an answer unresolved
(app/insights/followups.py) reads labelled follow-ups — `wrong` (the answer failed),
`again` (the same question in other words), `other` (thanks, details, a next question).

A follow-up counts as caught when the rule marks the answer unresolved in either way; the
report gives, per language, the share of `wrong` and of `again` caught and the share of
`other` marked by mistake. `--sweep` lists those figures over a grid of both thresholds:
how the shipped ones were chosen on the calibration set."""

from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from app.insights.followups import FollowUpReader
from knowledge.yaml_files import read_yaml

CALIBRATION = Path(__file__).with_name("insights") / "followups_calibration.yaml"
HELDOUT = Path(__file__).with_name("insights") / "followups_heldout.yaml"
KINDS = ("wrong", "again", "other")
WRONG_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
AGAIN_GRID = (0.86, 0.88, 0.89, 0.9, 0.91, 0.92, 0.94)


@dataclass(frozen=True)
class Labelled:
    language: str
    question: str
    follow_up: str
    kind: str  # wrong | again | other


@dataclass(frozen=True)
class Read:
    """A labelled follow-up with the rule's two readings of it."""

    item: Labelled
    wrong_probability: float
    similarity: float

    def caught(self, wrong_probability: float, again_similarity: float) -> bool:
        return self.wrong_probability >= wrong_probability or self.similarity >= again_similarity


def load_pairs(path: Path) -> list[Labelled]:
    pairs = [
        Labelled(item["language"], item["question"], item["follow_up"], item["kind"])
        for item in read_yaml(path)["pairs"]
    ]
    unknown = {pair.kind for pair in pairs} - set(KINDS)
    if unknown:
        raise ValueError(f"{path}: unknown kinds {sorted(unknown)}; use {', '.join(KINDS)}")
    return pairs


def read_all(reader: FollowUpReader, pairs: list[Labelled]) -> list[Read]:
    wrong = reader.wrong_probabilities([pair.follow_up for pair in pairs])
    similar = reader.similarities([(pair.question, pair.follow_up) for pair in pairs])
    return [Read(*row) for row in zip(pairs, wrong, similar, strict=True)]


def caught_shares(
    reads: list[Read], wrong_probability: float, again_similarity: float
) -> dict[str, dict[str, tuple[int, int]]]:
    """Per language (and `all`), per kind: (caught, total)."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    totals: dict[str, Counter[str]] = defaultdict(Counter)
    for read in reads:
        for language in (read.item.language, "all"):
            totals[language][read.item.kind] += 1
            counts[language][read.item.kind] += read.caught(wrong_probability, again_similarity)
    return {
        language: {kind: (counts[language][kind], totals[language][kind]) for kind in KINDS}
        for language in totals
    }
