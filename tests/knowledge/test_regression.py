"""The logistic regression the scope is fitted with, on vectors shaped like e5's: unit
length, most of each along one direction every text shares (cosines ~0.9 between any two),
the classes apart along a small other one."""

import numpy as np

from knowledge.regression import Fit, SoftmaxRegression
from knowledge.scope import SCOPE_FIT


def e5_like(count: int = 400, dimension: int = 384) -> tuple[np.ndarray, list[str]]:
    generator = np.random.default_rng(0)
    shared = np.zeros(dimension)
    shared[0] = 1.0
    apart = generator.normal(size=dimension)
    apart[0] = 0.0
    apart /= np.linalg.norm(apart)
    labels = ["covered" if i % 2 else "uncovered" for i in range(count)]
    side = np.array([1.0 if label == "covered" else -1.0 for label in labels])
    noise = 0.3 * generator.normal(size=(count, dimension)) / np.sqrt(dimension)
    vectors = 0.9 * shared + noise + 0.02 * side[:, None] * apart
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32), labels


def fitted_share(fit: Fit) -> float:
    """The share of its own vectors a fit labels right."""
    vectors, labels = e5_like()
    model = SoftmaxRegression(vectors, labels, fit=fit)
    predicted = np.asarray(model.classes)[model.predict_many(vectors).argmax(axis=1)]
    return float(np.mean(predicted == np.asarray(labels)))


def test_the_scope_fits_questions_that_share_most_of_their_vector() -> None:
    vectors, _ = e5_like()
    assert (vectors @ vectors.T).mean() > 0.8
    assert fitted_share(SCOPE_FIT) >= 0.95


def test_centring_is_what_fits_them() -> None:
    uncentred = Fit(scale=SCOPE_FIT.scale, l2=SCOPE_FIT.l2, steps=SCOPE_FIT.steps)
    assert fitted_share(uncentred) < 0.7
