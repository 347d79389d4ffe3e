"""What a collection's documentation covers at all: the second half of "not in the docs".

The similarity threshold (`knowledge.relevance`) asks whether a search found a passage
worded like the question. Many questions the documentation does not answer still find
one: "how much does the pro plan cost?" lands on a page about prices, "how do I connect
GnuCash to Shopify?" on one about importing. Questions labelled answerable / unanswerable
for that collection tell more: a question is outside the documentation when its nearest
labelled unanswerable questions are nearer than its nearest answerable ones (the mean
cosine of the `NEIGHBOURS` nearest of each kind, their difference the question's margin).
Features a program lacks are asked again and again, by users who word them differently
(web shops, payment providers, dark mode), each in a pocket of its own among the covered
how-tos, which one regression boundary over the vectors cannot separate and the nearest
labelled questions can (figures: docs/benchmarks.md#decisions).

A scope belongs to one collection: it reads that collection's labelled questions
(`SUPPORTBOT_KNOWLEDGE__SCOPE_QUESTIONS`) when first used, and the margin above which a
question is out of it (`SUPPORTBOT_KNOWLEDGE__SCOPE_CUT`) is chosen by `supportbot kb
calibrate --scope` on the same questions, by cross-validation."""

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from threading import Lock
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from knowledge.embeddings import Embedder, Vectors, query_vectors
from knowledge.graph_cache import GraphCache, default_cache_folder
from knowledge.relevance import LabelledQuestion, load_questions

if TYPE_CHECKING:
    from knowledge.settings import KnowledgeSettings

# Chosen on the GnuCash manuals' labelled questions, each set held out in turn with the
# thresholds and the cut chosen on the others (`supportbot kb calibrate --scope --by-set`,
# docs/decisions.md): 3, 5 and 7 neighbours caught as many; 5 leans less on one question.
NEIGHBOURS = 5
FOLDS = 10
# A margin is a difference of two cosines: no cut above this refuses anything.
NO_CUT = 2.0
# How `supportbot kb calibrate --scope` shares the answerable questions it may refuse: the
# similarity thresholds are placed at this share of them, the scope's cut takes the rest.
THRESHOLDS_SHARE = 0.4
# The cut aims at this share of what may be refused: k folds of one labelled set hide how
# far another set's wording lies (held out by set, more than the aimed share is refused).
CUT_MARGIN = 0.8

# Each labelled question's kind: answerable or not.
Kinds = Sequence[bool] | npt.NDArray[np.bool_]


@dataclass(frozen=True)
class ScopeCut:
    cut: float  # out of scope above this margin
    answerable: int
    refused: int  # answerable questions refused by the threshold or the scope
    unanswerable: int
    caught: int  # unanswerable questions told "not in the docs" by either


class NearestQuestions:
    """Labelled questions' query vectors (unit length), by kind; a question's margin."""

    def __init__(self, vectors: Vectors, answerable: Kinds, neighbours: int = NEIGHBOURS) -> None:
        covered = np.asarray(answerable, dtype=bool)
        if covered.all() or not covered.any():
            raise ValueError("a scope needs answerable and unanswerable questions")
        self._answerable = vectors[covered]
        self._unanswerable = vectors[~covered]
        self._neighbours = neighbours

    def margins(self, vectors: Vectors) -> np.ndarray:
        """How much nearer each vector's nearest unanswerable questions are than its
        nearest answerable ones: above 0, it reads like the unanswerable ones."""
        unanswerable = _nearest(vectors @ self._unanswerable.T, self._neighbours)
        return unanswerable - _nearest(vectors @ self._answerable.T, self._neighbours)


def _nearest(similarities: np.ndarray, neighbours: int) -> np.ndarray:
    """Each row's mean of its `neighbours` highest similarities."""
    count = min(neighbours, similarities.shape[1])
    highest = np.partition(similarities, similarities.shape[1] - count, axis=1)[:, -count:]
    mean: np.ndarray = highest.mean(axis=1)
    return mean


def held_out_margins(
    vectors: Vectors, answerable: Kinds, neighbours: int = NEIGHBOURS, folds: int = FOLDS
) -> np.ndarray:
    """Each question's margin among the others but its fold (k folds, every k-th question
    in one): what a question nobody labelled gets."""
    covered = np.asarray(answerable, dtype=bool)
    margins = np.zeros(len(covered))
    for fold in range(folds):
        held = np.arange(len(covered)) % folds == fold
        nearest = NearestQuestions(vectors[~held], covered[~held], neighbours)
        margins[held] = nearest.margins(vectors[held])
    return margins


def choose_cut(
    margins: np.ndarray,
    answerable: Kinds,
    refused_anyway: Kinds,
    max_refused: float,
) -> ScopeCut:
    """The lowest cut at which the scope and what is refused anyway (no passage above the
    similarity threshold) together refuse at most `max_refused` of the answerable
    questions."""
    covered = np.asarray(answerable)
    anyway = np.asarray(refused_anyway)
    allowed = int(max_refused * covered.sum())
    chosen = NO_CUT
    for cut in sorted(set(margins[covered].tolist()) | {NO_CUT}, reverse=True):
        if np.sum((anyway | (margins > cut)) & covered) > allowed:
            break
        chosen = cut
    refused = anyway | (margins > chosen)
    return ScopeCut(
        chosen,
        int(covered.sum()),
        int(np.sum(refused & covered)),
        int((~covered).sum()),
        int(np.sum(refused & ~covered)),
    )


def calibrate_scope(
    vectors: Vectors,
    answerable: Kinds,
    refused_anyway: Kinds,
    max_refused: float,
    neighbours: int = NEIGHBOURS,
) -> ScopeCut:
    """The cut for questions like these (their query vectors), beside what the thresholds
    refuse anyway: chosen on held-out margins, aimed at `CUT_MARGIN` of `max_refused`."""
    margins = held_out_margins(vectors, answerable, neighbours)
    return choose_cut(margins, answerable, refused_anyway, max_refused * CUT_MARGIN)


class DocumentationScope:
    """The scope of one collection (see the module docstring), its labelled questions read
    and embedded on first use (`warm`: a server's warm-up, after its port answers);
    `read_questions` gives them then; with `cache`, their vectors are kept on disk."""

    def __init__(
        self,
        embedder: Embedder,
        read_questions: Callable[[], Sequence[LabelledQuestion]],
        cut: float,
        cache: GraphCache | None = None,
    ) -> None:
        self.embedder = embedder
        self._read_questions = read_questions
        self.cut = cut
        self._cache = cache
        self._nearest: NearestQuestions | None = None
        self._lock = Lock()

    @cached_property
    def questions(self) -> list[LabelledQuestion]:
        questions = list(self._read_questions())
        if not any(q.answerable for q in questions) or all(q.answerable for q in questions):
            raise ValueError("a scope needs answerable and unanswerable questions")
        return questions

    @property
    def fingerprint(self) -> str:
        """Changes with what the vectors depend on: the questions' texts and the embedder
        (a question relabelled keeps its vector)."""
        text = "\0".join(question.text for question in self.questions)
        return hashlib.sha256(f"{self.embedder.name}\0{text}".encode()).hexdigest()[:16]

    def vectors(self) -> Vectors:
        texts = [question.text for question in self.questions]
        return query_vectors(self.embedder, texts, self._cache, "scope-questions", self.fingerprint)

    def warm(self) -> None:
        with self._lock:
            if self._nearest is None:
                answerable = [question.answerable for question in self.questions]
                self._nearest = NearestQuestions(self.vectors(), answerable)

    def margin(self, query: str) -> float:
        """How much more `query` reads like the unanswerable questions than the answerable
        ones (see `NearestQuestions`)."""
        self.warm()
        assert self._nearest is not None
        vector = self.embedder.embed_query(query)  # the search's own, from the cache
        return float(self._nearest.margins(vector[None])[0])

    def covers(self, query: str) -> bool:
        return self.margin(query) <= self.cut


def documentation_scope(
    settings: "KnowledgeSettings", embedder: Embedder
) -> DocumentationScope | None:
    """The configured collection's scope, or None when no questions are configured."""
    if not settings.scope_questions:
        return None
    paths = settings.scope_questions
    cache = GraphCache(settings.model_cache_dir or default_cache_folder())
    return DocumentationScope(
        embedder,
        lambda: [q for path in paths for q in load_questions(path)],
        settings.scope_cut,
        cache,
    )
