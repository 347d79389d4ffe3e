"""How well the kind of a remembered fact (app/memory/facts.py) tells a statement that
replaces an earlier one from one that adds to it: labelled statement pairs per language
(`same: true` when the newer should replace the older), in a calibration set the rule was
tuned on and a held-out set written before it and never tuned on."""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from app.memory.facts import kind_of

HERE = Path(__file__).resolve().parent / "kinds"
HELDOUT = HERE / "heldout.yaml"
CALIBRATION = HERE / "calibration.yaml"


@dataclass(frozen=True)
class Pair:
    lang: str
    older: str
    newer: str
    same: bool


@dataclass(frozen=True)
class Judged:
    pair: Pair
    older_kind: str
    newer_kind: str

    @property
    def right(self) -> bool:
        return (self.older_kind == self.newer_kind) == self.pair.same


@dataclass(frozen=True)
class Accuracy:
    lang: str
    pairs: int
    right: int
    same: int  # pairs labelled one kind
    same_right: int  # ... given one kind
    different: int
    different_right: int


def load_pairs(path: Path) -> list[Pair]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [
        Pair(str(p["lang"]), str(p["older"]), str(p["newer"]), bool(p["same"]))
        for p in data["pairs"]
    ]


def judge(pairs: Sequence[Pair]) -> list[Judged]:
    return [Judged(p, kind_of(p.older), kind_of(p.newer)) for p in pairs]


def accuracy(judged: Sequence[Judged]) -> list[Accuracy]:
    """Per language, in the order they come, and `all`."""
    languages = list(dict.fromkeys(j.pair.lang for j in judged))
    found = []
    for lang in [*languages, "all"]:
        mine = [j for j in judged if lang in ("all", j.pair.lang)]
        same = [j for j in mine if j.pair.same]
        different = [j for j in mine if not j.pair.same]
        found.append(
            Accuracy(
                lang,
                len(mine),
                sum(j.right for j in mine),
                len(same),
                sum(j.right for j in same),
                len(different),
                sum(j.right for j in different),
            )
        )
    return found
