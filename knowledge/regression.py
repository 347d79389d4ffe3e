"""Logistic regression over embedding vectors: the routing decisions' intents
(app/decisions/intent.py) and what a collection's documentation covers
(knowledge/scope.py) are each one, fitted to labelled texts' e5 query vectors.

Deterministic (full-batch gradient descent from zero). e5's cosines sit close together,
so the inputs are scaled before the softmax; each use chooses its scale and penalty by
cross-validation on its own labelled data."""

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from knowledge.embeddings import Vectors

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Fit:
    scale: float = 10.0  # the inputs' factor
    l2: float = 1e-3  # the weights' penalty
    steps: int = 300
    rate: float = 0.5


class SoftmaxRegression:
    """Multinomial logistic regression with an L2 penalty, fitted by gradient descent;
    `weights`: each vector's weight in the loss (by default 1 each)."""

    def __init__(
        self,
        vectors: Vectors,
        labels: list[str],
        weights: Floats | None = None,
        fit: Fit = Fit(),
    ) -> None:
        self.classes = sorted(set(labels))
        self._scale = fit.scale
        targets = np.array([self.classes.index(label) for label in labels])
        inputs = vectors.astype(np.float64) * fit.scale
        weight = (np.ones(len(labels)) if weights is None else weights)[:, None]
        self._weights = np.zeros((inputs.shape[1], len(self.classes)))
        self._bias = np.zeros(len(self.classes))
        for _ in range(fit.steps):
            gradient = self._probabilities(inputs)
            gradient[np.arange(len(targets)), targets] -= 1
            gradient = gradient * weight / weight.sum()
            self._weights -= fit.rate * (inputs.T @ gradient + fit.l2 * self._weights)
            self._bias -= fit.rate * gradient.sum(axis=0)

    def _probabilities(self, inputs: Floats) -> Floats:
        logits = inputs @ self._weights + self._bias
        logits -= logits.max(axis=-1, keepdims=True)
        exponentials = np.exp(logits)
        return exponentials / exponentials.sum(axis=-1, keepdims=True)

    def predict(self, vector: Vectors) -> dict[str, float]:
        probabilities = self.predict_many(vector[None])[0]
        return dict(zip(self.classes, probabilities.tolist(), strict=True))

    def predict_many(self, vectors: Vectors) -> Floats:
        """Each vector's probabilities, in the order of `classes`."""
        return self._probabilities(vectors.astype(np.float64) * self._scale)
