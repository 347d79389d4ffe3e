"""Questions grouped by topic: average-linkage clustering of their e5 embeddings under
cosine distance, numpy only, the tree cut where its merge distances jump most.

Questions on one topic merge at small distances, different topics at larger ones; the
largest jump between successive merges separates the two, so the cut comes from the data,
not from a similarity threshold tuned per embedder. A question unlike any other stays a
group of its own (a topic asked once is still a gap). Cost: O(n²) memory and O(n²) per
merge step in numpy, about a second for a thousand questions."""

from collections import Counter
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from knowledge.queries import topic_words

Matrix = npt.NDArray[np.float32]

# Question wording, not topic, in the languages the service has wording for (English stop
# words come with `topic_words`).
# fmt: off
QUESTION_WORDS = frozenset({
    "как", "что", "где", "почему", "когда", "можно", "нужно", "мне", "это", "или", "для", "при",
    "чтобы", "есть", "нет", "все", "кто", "какой", "какая", "сколько", "этом", "году", "вашей",
    "вашего", "ваш", "через", "wie", "was", "wo", "warum", "wann", "kann", "ich", "ist", "ein",
    "eine", "einen", "der", "die", "das", "und", "mit", "für", "nicht", "bei", "hat", "auf",
    "gibt", "sie", "ihnen", "mein", "meine", "meiner", "welche", "viele", "how", "what",
    "where", "why", "when", "which", "can", "cannot", "yet",
})
# fmt: on


@dataclass(frozen=True)
class Topic:
    members: list[int]  # indexes into the questions, the most central first
    words: list[str]


def unit(vectors: Matrix) -> Matrix:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


def merges(vectors: Matrix) -> list[tuple[float, int, int]]:
    """Average-linkage agglomeration under cosine distance: each merge's distance and the
    two groups it joined (each named by one of its members), in order."""
    n = len(vectors)
    distance = (1.0 - vectors @ vectors.T).astype(np.float64)
    np.fill_diagonal(distance, np.inf)
    sizes = np.ones(n)
    done = []
    for _ in range(n - 1):
        i, j = divmod(int(np.argmin(distance)), n)
        done.append((float(distance[i, j]), i, j))
        joined = (sizes[i] * distance[i] + sizes[j] * distance[j]) / (sizes[i] + sizes[j])
        distance[i], distance[:, i] = joined, joined
        distance[i, i] = np.inf
        distance[j], distance[:, j] = np.inf, np.inf
        sizes[i] += sizes[j]
    return done


def cut_height(heights: list[float], typical: float) -> float:
    """Where to cut the tree: in the largest jump between successive merge distances, among
    merges closer than `typical` (the median distance of two questions: a merge beyond it
    joins groups less alike than an average pair, never one topic)."""
    below = [h for h in heights if h <= typical]
    if len(below) < 2:
        return below[0] if below else -1.0
    jumps = [(below[k + 1] - below[k], k) for k in range(len(below) - 1)]
    _, k = max(jumps)
    return (below[k] + below[k + 1]) / 2


def best_labels(vectors: Matrix) -> npt.NDArray[np.intp]:
    """Each question's group: the average-linkage tree cut at its largest jump below the
    median pairwise distance. Fewer than three questions cannot be judged that way: each
    is its own group."""
    n = len(vectors)
    if n < 3:
        return np.arange(n, dtype=np.intp)
    done = merges(vectors)
    typical = float(np.median((1.0 - vectors @ vectors.T)[np.triu_indices(n, 1)]))
    threshold = cut_height(sorted(h for h, _, _ in done), typical)
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for height, i, j in done:
        if height <= threshold:
            parent[root(j)] = root(i)
    roots = [root(i) for i in range(n)]
    numbering = {r: label for label, r in enumerate(dict.fromkeys(roots))}
    return np.array([numbering[r] for r in roots], dtype=np.intp)


def top_words(questions: list[str], count: int = 4) -> list[str]:
    """The content words most of the group's questions use."""
    seen = Counter(
        word
        for question in questions
        for word in set(topic_words(question))
        if word not in QUESTION_WORDS
    )
    return [word for word, _ in seen.most_common(count)]


def topics(questions: list[str], vectors: Matrix) -> list[Topic]:
    """The questions' topics, the largest first; each lists its members, the most central
    (highest mean cosine to the others) first."""
    vectors = unit(vectors)
    labels = best_labels(vectors)
    found = []
    for label in sorted(set(labels.tolist())):
        members = np.flatnonzero(labels == label)
        group = vectors[members]
        centrality = (group @ group.T).mean(axis=1)
        ordered = [int(members[i]) for i in np.argsort(-centrality, kind="stable")]
        found.append(
            Topic(
                members=ordered,
                words=top_words([questions[i] for i in ordered]),
            )
        )
    return sorted(found, key=lambda topic: -len(topic.members))
