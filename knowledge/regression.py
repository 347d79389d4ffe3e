"""Logistic regression over embedding vectors: the routing decisions' intents
(app/decisions/intent.py) and what a collection's documentation covers
(knowledge/scope.py) are each one, fitted to labelled texts' e5 query vectors.

Deterministic (full-batch gradient descent from zero). e5's cosines sit close together,
so the inputs are scaled before the softmax; each use chooses its scale and penalty by
cross-validation on its own labelled data."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class SoftmaxRegression:
    """Multinomial logistic regression with an L2 penalty (`fitted`), kept as its arrays
    (`arrays` and `from_arrays` store and restore it)."""

    classes: list[str]
    weights: Floats  # (inputs, classes)
    bias: Floats  # (classes,)
    scale: float  # the inputs' factor

    @classmethod
    def fitted(
        cls,
        vectors: Vectors,
        labels: list[str],
        weights: Floats | None = None,
        fit: Fit = Fit(),
    ) -> "SoftmaxRegression":
        """Fitted by gradient descent; `weights`: each vector's weight in the loss (by
        default 1 each)."""
        classes = sorted(set(labels))
        targets = np.array([classes.index(label) for label in labels])
        inputs = vectors.astype(np.float64) * fit.scale
        weight = (np.ones(len(labels)) if weights is None else weights)[:, None]
        model = cls(
            classes, np.zeros((inputs.shape[1], len(classes))), np.zeros(len(classes)), fit.scale
        )
        for _ in range(fit.steps):
            gradient = model._probabilities(inputs)
            gradient[np.arange(len(targets)), targets] -= 1
            gradient = gradient * weight / weight.sum()
            model.weights[...] -= fit.rate * (inputs.T @ gradient + fit.l2 * model.weights)
            model.bias[...] -= fit.rate * gradient.sum(axis=0)
        return model

    def arrays(self, prefix: str) -> dict[str, npt.NDArray[Any]]:
        """The model as named arrays (for `numpy.savez`), each name starting with `prefix`."""
        return {
            f"{prefix}classes": np.array(self.classes),
            f"{prefix}weights": self.weights,
            f"{prefix}bias": self.bias,
            f"{prefix}scale": np.array(self.scale),
        }

    @classmethod
    def from_arrays(
        cls, arrays: Mapping[str, npt.NDArray[Any]], prefix: str
    ) -> "SoftmaxRegression":
        return cls(
            [str(name) for name in arrays[f"{prefix}classes"]],
            np.asarray(arrays[f"{prefix}weights"], dtype=np.float64),
            np.asarray(arrays[f"{prefix}bias"], dtype=np.float64),
            float(arrays[f"{prefix}scale"]),
        )

    def _probabilities(self, inputs: Floats) -> Floats:
        logits = inputs @ self.weights + self.bias
        logits -= logits.max(axis=-1, keepdims=True)
        exponentials = np.exp(logits)
        return exponentials / exponentials.sum(axis=-1, keepdims=True)

    def predict(self, vector: Vectors) -> dict[str, float]:
        probabilities = self.predict_many(vector[None])[0]
        return dict(zip(self.classes, probabilities.tolist(), strict=True))

    def predict_many(self, vectors: Vectors) -> Floats:
        """Each vector's probabilities, in the order of `classes`."""
        return self._probabilities(vectors.astype(np.float64) * self.scale)
