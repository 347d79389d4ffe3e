"""The scope's margin (knowledge/scope.py): a question reads like the labelled questions
nearest to it, on vectors shaped like e5's (unit length, most of each along one direction
every text shares)."""

import numpy as np
import pytest

from knowledge.scope import NEIGHBOURS, NearestQuestions, held_out_margins

DIMENSION = 384


def e5_like(centre: np.ndarray, count: int, generator: np.random.Generator) -> np.ndarray:
    shared = np.zeros(DIMENSION)
    shared[0] = 1.0
    noise = 0.2 * generator.normal(size=(count, DIMENSION)) / np.sqrt(DIMENSION)
    vectors = 0.9 * shared + 0.3 * centre + noise
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def direction(index: int) -> np.ndarray:
    unit = np.zeros(DIMENSION)
    unit[index] = 1.0
    return unit


@pytest.fixture
def labelled() -> tuple[np.ndarray, np.ndarray]:
    """Answerable questions around one topic; unanswerable ones in two pockets on either
    side of it (a web shop's integration, a mobile app): no one boundary between them."""
    generator = np.random.default_rng(0)
    vectors = np.concatenate(
        [
            e5_like(direction(1), 60, generator),
            e5_like(direction(1) + direction(2), 20, generator),
            e5_like(direction(1) - direction(2), 20, generator),
        ]
    )
    answerable = np.array([True] * 60 + [False] * 40, dtype=bool)
    return vectors, answerable


def test_a_question_near_either_pocket_reads_as_unanswerable(
    labelled: tuple[np.ndarray, np.ndarray],
) -> None:
    nearest = NearestQuestions(*labelled)
    generator = np.random.default_rng(1)
    asked = np.concatenate(
        [
            e5_like(direction(1), 5, generator),
            e5_like(direction(1) + direction(2), 5, generator),
            e5_like(direction(1) - direction(2), 5, generator),
        ]
    )
    margins = nearest.margins(asked)
    assert (margins[:5] < 0).all() and (margins[5:] > 0).all(), margins


def test_a_held_out_margin_does_not_see_its_own_question(
    labelled: tuple[np.ndarray, np.ndarray],
) -> None:
    vectors, answerable = labelled
    # A lone unanswerable question far from the others: among its own, it is its nearest.
    lone = e5_like(direction(3), 1, np.random.default_rng(2))
    vectors = np.concatenate([vectors, lone])
    answerable = np.append(answerable, False)
    seen = NearestQuestions(vectors, answerable).margins(lone)[0]
    held_out = held_out_margins(vectors, answerable)[-1]
    assert held_out < seen


def test_fewer_questions_of_a_kind_than_neighbours_are_all_used() -> None:
    generator = np.random.default_rng(3)
    vectors = e5_like(direction(1), NEIGHBOURS + 2, generator)
    answerable = np.array([True] * (NEIGHBOURS + 1) + [False])
    margins = NearestQuestions(vectors, answerable).margins(vectors)
    assert np.isfinite(margins).all()
    with pytest.raises(ValueError, match="answerable and unanswerable"):
        NearestQuestions(vectors, np.ones(len(vectors), dtype=bool))
