"""What a collection's documentation covers at all: the second half of "not in the docs".

The similarity threshold (`knowledge.relevance`) asks whether a search found a passage
worded like the question. Many questions the documentation does not answer still find
one: "how much does the pro plan cost?" lands on a page about prices, "is there an
iPhone app?" on one about importing from a phone. Their vectors tell more than their best
similarity: on the GnuCash manuals, a logistic regression over the question's centred e5
query vector, fitted to questions labelled answerable / unanswerable for that collection,
told 91% of unanswerable questions "not in the docs" at 5% of answerable ones refused
(each labelled set held out in turn, fitted on the others), where the thresholds alone
told 61%; on the newest sets written blind about half (51-56%, 0-1 of 75 refused): features
the program lacks, asked as how-tos, sit among the covered ones (docs/benchmarks.md,
decisions).

A scope belongs to one collection: it is fitted to that collection's labelled questions
(`SUPPORTBOT_KNOWLEDGE__SCOPE_QUESTIONS`), when first used, and the probability above
which a question is out of it (`SUPPORTBOT_KNOWLEDGE__SCOPE_CUT`) is chosen by
`supportbot kb calibrate --scope` on the same questions, by cross-validation."""

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from threading import Lock
from typing import TYPE_CHECKING

import numpy as np

from knowledge.embeddings import Embedder, Vectors, query_vectors
from knowledge.graph_cache import GraphCache, default_cache_folder
from knowledge.regression import Fit, SoftmaxRegression
from knowledge.relevance import LabelledQuestion, load_questions

if TYPE_CHECKING:
    from app.settings import KnowledgeSettings

UNCOVERED = "unanswerable"
COVERED = "answerable"
# Chosen by cross-validation on the GnuCash manuals' labelled questions, each set held
# out in turn (docs/decisions.md): of scales 5/10/20 and penalties 0.001/0.01, the one that
# caught the most unanswerable questions at 5% of answerable ones refused. Centred, held
# out by set over the calibration set and twelve held-out sets: 91% caught at 5% refused
# (78% uncentred, which fitted its own questions to 93% only: a borscht recipe read as
# covered); scales 10-100 and 300-2,000 steps within a point of it.
SCOPE_FIT = Fit(scale=10.0, l2=1e-3, center=True)
FOLDS = 10
# How `supportbot kb calibrate --scope` shares the answerable questions it may refuse: the
# similarity thresholds are placed at this share of them, the scope's cut takes the rest.
THRESHOLDS_SHARE = 0.4
# The cut aims at this share of what may be refused: k folds of one labelled set hide how
# far another set's wording lies (held out by set, a cut aimed at 5% refused 6-7%).
CUT_MARGIN = 0.8


@dataclass(frozen=True)
class ScopeCut:
    cut: float  # out of scope above this probability
    answerable: int
    refused: int  # answerable questions refused by the threshold or the scope
    unanswerable: int
    caught: int  # unanswerable questions told "not in the docs" by either


def fit_scope(vectors: Vectors, answerable: Sequence[bool]) -> SoftmaxRegression:
    labels = [COVERED if covered else UNCOVERED for covered in answerable]
    return SoftmaxRegression(vectors, labels, fit=SCOPE_FIT)


def uncovered_probabilities(model: SoftmaxRegression, vectors: Vectors) -> np.ndarray:
    return model.predict_many(vectors)[:, model.classes.index(UNCOVERED)]


def held_out_probabilities(
    vectors: Vectors, answerable: Sequence[bool], folds: int = FOLDS
) -> np.ndarray:
    """Each question's probability of being out of scope from a fit without it (k folds,
    every k-th question in one): what a question nobody labelled gets."""
    covered = np.asarray(answerable)
    probabilities = np.zeros(len(covered))
    for fold in range(folds):
        held = np.arange(len(covered)) % folds == fold
        model = fit_scope(vectors[~held], list(covered[~held]))
        probabilities[held] = uncovered_probabilities(model, vectors[held])
    return probabilities


def choose_cut(
    probabilities: np.ndarray,
    answerable: Sequence[bool],
    refused_anyway: Sequence[bool],
    max_refused: float,
) -> ScopeCut:
    """The lowest cut at which the scope and what is refused anyway (no passage above the
    similarity threshold) together refuse at most `max_refused` of the answerable
    questions."""
    covered = np.asarray(answerable)
    anyway = np.asarray(refused_anyway)
    allowed = int(max_refused * covered.sum())
    chosen = 1.0
    for cut in sorted(set(probabilities[covered].tolist()) | {1.0}, reverse=True):
        if np.sum((anyway | (probabilities > cut)) & covered) > allowed:
            break
        chosen = cut
    refused = anyway | (probabilities > chosen)
    return ScopeCut(
        chosen,
        int(covered.sum()),
        int(np.sum(refused & covered)),
        int((~covered).sum()),
        int(np.sum(refused & ~covered)),
    )


def calibrate_scope(
    vectors: Vectors,
    answerable: Sequence[bool],
    refused_anyway: Sequence[bool],
    max_refused: float,
) -> ScopeCut:
    """The cut for questions like these (their query vectors), beside what the thresholds
    refuse anyway: chosen on held-out probabilities, aimed at `CUT_MARGIN` of
    `max_refused`."""
    probabilities = held_out_probabilities(vectors, answerable)
    return choose_cut(probabilities, answerable, refused_anyway, max_refused * CUT_MARGIN)


class DocumentationScope:
    """The fitted scope of one collection (see the module docstring), fitted on first use
    (`warm`: a server's warm-up, after its port answers); `read_questions` gives its
    labelled questions then; with `cache`, their vectors are kept on disk."""

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
        self._model: SoftmaxRegression | None = None
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
            if self._model is None:
                answerable = [question.answerable for question in self.questions]
                self._model = fit_scope(self.vectors(), answerable)

    def uncovered(self, query: str) -> float:
        """The probability that the documentation does not cover `query`."""
        self.warm()
        assert self._model is not None
        vector = self.embedder.embed_query(query)  # the search's own, from the cache
        return float(uncovered_probabilities(self._model, vector[None])[0])

    def covers(self, query: str) -> bool:
        return self.uncovered(query) <= self.cut


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
