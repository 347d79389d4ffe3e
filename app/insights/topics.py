"""Questions grouped by topic: spherical k-means over their e5 embeddings, the number of
groups the one with the best mean silhouette (cosine distance), numpy only.

k-means on unit vectors groups by cosine; the silhouette compares each question's
distance to its own group with its distance to the nearest other group, so the chosen k is
the one the data separates best, with no similarity threshold to tune per embedder."""

from collections import Counter
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from knowledge.queries import topic_words

Matrix = npt.NDArray[np.float32]

MAX_GROUPS = 20
RESTARTS = 3  # k-means runs per k; the tightest is kept
ITERATIONS = 30
SILHOUETTE_SAMPLE = 1500  # questions the silhouette is measured on, at most
# Question wording, not topic, in the languages the service has wording for (English stop
# words come with `topic_words`).
QUESTION_WORDS = frozenset(
    [
        "как",
        "что",
        "где",
        "почему",
        "когда",
        "можно",
        "нужно",
        "мне",
        "это",
        "или",
        "для",
        "при",
        "чтобы",
        "есть",
        "нет",
        "все",
        "wie",
        "was",
        "wo",
        "warum",
        "wann",
        "kann",
        "ich",
        "ist",
        "ein",
        "eine",
        "der",
        "die",
        "das",
        "und",
        "mit",
        "für",
        "nicht",
        "how",
        "what",
        "where",
        "why",
        "when",
        "which",
        "can",
        "cannot",
    ]
)


@dataclass(frozen=True)
class Topic:
    members: list[int]  # indexes into the questions, the most central first
    words: list[str]


def unit(vectors: Matrix) -> Matrix:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


def kmeans(vectors: Matrix, k: int, rng: np.random.Generator) -> tuple[npt.NDArray[np.intp], float]:
    """Labels and total cosine to the centroids of one spherical k-means run (k-means++
    seeding) over unit vectors."""
    n = len(vectors)
    centres = [vectors[rng.integers(n)]]
    for _ in range(1, k):
        distance = np.clip(1.0 - np.max(vectors @ np.array(centres).T, axis=1), 0.0, None)
        total = distance.sum()
        pick = rng.choice(n, p=distance / total) if total > 0 else rng.integers(n)
        centres.append(vectors[pick])
    centroids = np.array(centres)
    labels = np.zeros(n, dtype=np.intp)
    for _ in range(ITERATIONS):
        new_labels = np.argmax(vectors @ centroids.T, axis=1)
        for group in range(k):
            members = vectors[new_labels == group]
            if len(members):
                centroids[group] = unit(members.sum(axis=0, keepdims=True))[0]
        if np.array_equal(new_labels, labels):
            break
        labels = new_labels
    similarity = float(np.sum(np.max(vectors @ centroids.T, axis=1)))
    return labels, similarity


def silhouette(vectors: Matrix, labels: npt.NDArray[np.intp]) -> float:
    """Mean silhouette with cosine distance; a question alone in its group scores 0."""
    distance = 1.0 - vectors @ vectors.T
    scores = []
    for i, label in enumerate(labels):
        own = labels == label
        if own.sum() <= 1:
            scores.append(0.0)
            continue
        a = distance[i, own].sum() / (own.sum() - 1)
        b = min(distance[i, labels == other].mean() for other in set(labels) if other != label)
        scores.append((b - a) / max(a, b) if max(a, b) > 0 else 0.0)
    return float(np.mean(scores))


def best_labels(vectors: Matrix, seed: int = 0) -> npt.NDArray[np.intp]:
    """Each question's group, k chosen by silhouette from 2 to min(n - 1, MAX_GROUPS).
    Fewer than three questions cannot be judged that way: each is its own group."""
    n = len(vectors)
    if n < 3:
        return np.arange(n, dtype=np.intp)
    rng = np.random.default_rng(seed)
    sample = rng.choice(n, size=min(n, SILHOUETTE_SAMPLE), replace=False)
    best: tuple[float, npt.NDArray[np.intp]] | None = None
    for k in range(2, min(n - 1, MAX_GROUPS) + 1):
        runs = [kmeans(vectors, k, rng) for _ in range(RESTARTS)]
        labels = max(runs, key=lambda run: run[1])[0]
        score = silhouette(vectors[sample], labels[sample])
        if best is None or score > best[0]:
            best = (score, labels)
    assert best is not None
    return best[1]


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
