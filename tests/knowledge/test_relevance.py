"""'Not in the documentation': the calibration that picks the relevance threshold, and the
best similarity of a search on real manual pages (knowledge/relevance.py)."""

import pytest

from knowledge.relevance import (
    ANY_LANGUAGE,
    LabelledQuestion,
    best_similarity,
    calibrate,
    calibrate_by_language,
    outcome_at,
)
from knowledge.store import KnowledgeBase


def _scored(
    answerable: list[float], unanswerable: list[float]
) -> list[tuple[LabelledQuestion, float]]:
    return [(LabelledQuestion("a", True), best) for best in answerable] + [
        (LabelledQuestion("u", False), best) for best in unanswerable
    ]


def test_the_threshold_refuses_at_most_the_allowed_share_of_answerable_questions() -> None:
    answerable = [0.80 + i / 100 for i in range(20)]  # 0.80 … 0.99
    unanswerable = [0.70, 0.79, 0.805, 0.95]

    chosen = calibrate(_scored(answerable, unanswerable), max_refused=0.05)

    assert chosen.threshold == pytest.approx(0.81)  # refuses one of twenty
    assert (chosen.refused, chosen.answerable) == (1, 20)
    assert (chosen.caught, chosen.unanswerable) == (3, 4)
    stricter = calibrate(_scored(answerable, unanswerable), max_refused=0.0)
    assert stricter.refused == 0 and stricter.caught == 2
    assert outcome_at(0.9, _scored(answerable, unanswerable)).refused == 10


def test_a_language_with_enough_answerable_questions_gets_its_own_threshold() -> None:
    english = _scored([0.85 + i / 200 for i in range(20)], [0.84, 0.86])
    russian = [(LabelledQuestion(q.text, q.answerable, "ru"), best - 0.05) for q, best in english]
    german = [(LabelledQuestion("a", True, "de"), 0.9)] * 5  # too few for a threshold

    chosen = calibrate_by_language(english + russian + german, max_refused=0.05)

    assert set(chosen) == {ANY_LANGUAGE, "en", "ru"}
    assert chosen["en"].threshold == pytest.approx(0.855)
    assert chosen["ru"].threshold == pytest.approx(0.805)
    assert (chosen["en"].caught, chosen["ru"].caught) == (1, 1)
    assert chosen[ANY_LANGUAGE].answerable == 45


def test_calibrating_needs_answerable_questions() -> None:
    with pytest.raises(ValueError, match="answerable"):
        calibrate(_scored([], [0.7]))


def test_an_off_topic_question_finds_a_lower_best_similarity_than_a_covered_one(
    knowledge_base: KnowledgeBase,
) -> None:
    covered = best_similarity(knowledge_base, "How do I reconcile my bank account?")
    off_topic = best_similarity(knowledge_base, "Who won the football world cup in 2014?")
    assert 0 < off_topic < covered <= 1


@pytest.mark.parametrize("grouped", [False, True])
def test_in_hybrid_mode_a_passage_keeps_its_dense_similarity_not_the_fused_rank(
    knowledge_base: KnowledgeBase, grouping_base: KnowledgeBase, grouped: bool
) -> None:
    query = "How do I reconcile my bank account?"
    searched = grouping_base if grouped else knowledge_base
    dense = searched.with_options(keyword_weight=0.0, static_weight=0.0)
    hybrid = dense.with_options(hybrid=True)
    every_passage = dense.with_options(passages_per_page=10)
    cosine = {p.text: p.similarity for p in every_passage.search(query, 40)}

    fused = hybrid.search(query, 4)

    assert fused and all(p.score != pytest.approx(p.similarity) for p in fused)  # ranks
    for passage in fused:
        assert passage.similarity == pytest.approx(cosine[passage.text], abs=1e-4)
