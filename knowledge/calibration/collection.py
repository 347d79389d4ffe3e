"""Where "not in the documentation" starts for one collection, made from the collection
itself when it is ingested: no labelled questions needed, no constant chosen on another
corpus's scores.

The documentation's own scores say where it stops. A bank of questions no product's
documentation answers ships with the service (`unanswerable.yaml`: world knowledge, other
companies' products, the vendor as a company, chit-chat, requests a help center has no page
for; written natively in English, Russian, German and eight more languages). Every bank
question is searched in the collection like a user's question; the best dense similarity
each finds is how near unrelated questions come to *these* pages. A passage is relevant
when it comes nearer than all but `BANK_QUANTILE` of them: the threshold is that quantile
of the bank's best similarities, per language of the question (a question in the
documentation's language finds passages worded like it, one in another language only their
meaning, so the scales differ), with the quantile over every bank question for languages
the bank has fewer than `MIN_BANK_PER_LANGUAGE` questions in.

Stored with the collection (`store_calibration`: a companion collection holding one point,
so both stores, Edge and server, keep it) and redone by every ingest that changes the
collection; `supportbot kb stats` shows it; configured `min_similarity` values, or
`supportbot kb calibrate --questions`, override it.
"""

import hashlib
import json
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from knowledge.client import DENSE, SPARSE, KnowledgeClient
from knowledge.embeddings import Embedder, query_vectors
from knowledge.graph_cache import GraphCache
from knowledge.relevance import ANY_LANGUAGE, RelevanceThresholds
from knowledge.yaml_files import read_yaml

BANK = Path(__file__).with_name("unanswerable.yaml")
# Bump when the method changes, so that the next ingest calibrates again.
METHOD_VERSION = "2"
# The share of the bank's questions a threshold lets through as relevant. Chosen on the
# GnuCash manuals' development questions (docs/decisions.md#calibration-per-collection).
BANK_QUANTILE = 0.95
# Below the threshold, a page nearer than this share of the bank's questions come is still
# offered as possibly related when nothing answers (an unsure reply lists it). Chosen on the
# same questions.
RELATED_QUANTILE = 0.5
MIN_BANK_PER_LANGUAGE = 50
SUFFIX = "__calibration"  # the companion collection: `<collection>__calibration`
_POINT = str(uuid.UUID("5c0b8a34-2f7e-4d53-9a71-0c6f1f2b9e10"))

# The best dense similarity a search of the collection finds for a query vector.
BestSimilarity = Callable[[np.ndarray], float]


@dataclass(frozen=True)
class BankQuestion:
    text: str
    language: str


@dataclass(frozen=True)
class CollectionCalibration:
    """A collection's relevance thresholds by question language (`""`: any other)."""

    embedder: str
    thresholds: dict[str, float]
    related: dict[str, float]  # from where a page is offered as possibly related
    bank_questions: dict[str, int]  # per language
    passages: int
    made_at: float = field(default_factory=time.time)
    method: str = METHOD_VERSION

    def relevance(self, documentation_language: str) -> RelevanceThresholds:
        return RelevanceThresholds(
            *_split(self.thresholds),
            documentation_language,
            RelevanceThresholds(*_split(self.related), documentation_language),
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CollectionCalibration":
        return cls(**data)


def _split(thresholds: dict[str, float]) -> tuple[float, dict[str, float]]:
    """(the threshold over every language, those per language)."""
    others = {lang: value for lang, value in thresholds.items() if lang != ANY_LANGUAGE}
    return thresholds.get(ANY_LANGUAGE, 0.0), others


def load_bank(path: Path = BANK) -> list[BankQuestion]:
    return [BankQuestion(item["text"], item["language"]) for item in read_yaml(path)["questions"]]


def bank_fingerprint(questions: Sequence[BankQuestion], embedder: Embedder) -> str:
    text = "\0".join(question.text for question in questions)
    return hashlib.sha256(f"{embedder.name}\0{text}".encode()).hexdigest()[:16]


def thresholds_from_bank(
    best: Sequence[float],
    languages: Sequence[str],
    quantile: float = BANK_QUANTILE,
    min_per_language: int = MIN_BANK_PER_LANGUAGE,
) -> dict[str, float]:
    """The `quantile` of the bank questions' best similarities, over all of them (key
    `ANY_LANGUAGE`) and per language with at least `min_per_language` questions."""
    by_language: dict[str, list[float]] = defaultdict(list)
    for similarity, language in zip(best, languages, strict=True):
        by_language[language].append(similarity)
    chosen = {ANY_LANGUAGE: round(float(np.quantile(best, quantile)), 4)}
    for language, values in sorted(by_language.items()):
        if len(values) >= min_per_language:
            chosen[language] = round(float(np.quantile(values, quantile)), 4)
    return chosen


def calibrate_collection(
    embedder: Embedder,
    best_similarity: BestSimilarity,
    passages: int,
    cache: GraphCache | None = None,
    bank: Sequence[BankQuestion] | None = None,
) -> CollectionCalibration:
    """The thresholds for a collection whose search `best_similarity` answers (see the
    module docstring); the bank's query vectors are kept in `cache`."""
    questions = list(bank if bank is not None else load_bank())
    vectors = query_vectors(
        embedder,
        [question.text for question in questions],
        cache,
        "calibration-bank",
        bank_fingerprint(questions, embedder),
    )
    best = [best_similarity(vector) for vector in vectors]
    languages = [question.language for question in questions]
    counts: dict[str, int] = defaultdict(int)
    for language in languages:
        counts[language] += 1
    return CollectionCalibration(
        embedder=embedder.name,
        thresholds=thresholds_from_bank(best, languages),
        related=thresholds_from_bank(best, languages, RELATED_QUANTILE),
        bank_questions=dict(sorted(counts.items())),
        passages=passages,
    )


def companion(collection: str) -> str:
    return f"{collection}{SUFFIX}"


def store_calibration(
    knowledge: KnowledgeClient, collection: str, calibration: CollectionCalibration
) -> None:
    """Keep the calibration beside the collection, in the same store."""
    from qdrant_client import models

    name = companion(collection)
    knowledge.ensure_collection(name, 1, "none")
    payload = {"calibration": json.dumps(calibration.as_dict()), "root": "", "source": ""}
    vector = {DENSE: [1.0], SPARSE: models.SparseVector(indices=[], values=[])}
    knowledge.upsert(name, [models.PointStruct(id=_POINT, vector=vector, payload=payload)])


def load_calibration(knowledge: KnowledgeClient, collection: str) -> CollectionCalibration | None:
    """The calibration stored with a collection, or None (never ingested since calibration
    came in, or made by another method: the next ingest makes it)."""
    name = companion(collection)
    if not knowledge.collection_exists(name):
        return None
    for _, payload in knowledge.scroll(name, ["calibration"]):
        data = json.loads(payload["calibration"])
        if data.get("method") == METHOD_VERSION:
            return CollectionCalibration.from_dict(data)
    return None


def drop_calibration(knowledge: KnowledgeClient, collection: str) -> None:
    name = companion(collection)
    if knowledge.collection_exists(name):
        knowledge.delete(name, {"root": ""})
