"""The search_knowledge_base tool result: numbered, cited, within its token budget."""

from app.tokens import count_tokens
from knowledge.format import format_passages
from knowledge.types import Passage


def _passage(number: int, words: int) -> Passage:
    return Passage(
        text=" ".join(f"word{number}-{i}" for i in range(words)),
        title=f"Page {number}",
        heading=f"Manual > Page {number} > Section",
        source=f"manual/page{number}.html",
        score=0.9,
    )


def test_passages_are_numbered_with_title_heading_and_source() -> None:
    result = format_passages("vat", [_passage(1, 20), _passage(2, 20)], 1000)
    assert result.startswith('Knowledge base results for "vat":')
    assert "[1] Page 1 — Manual > Page 1 > Section (source: manual/page1.html)" in result
    assert "[2] Page 2" in result


def test_result_is_cut_to_the_budget() -> None:
    passages = [_passage(number, 400) for number in range(1, 5)]
    result = format_passages("vat", passages, 1000)
    assert count_tokens(result) <= 1000
    assert "[1]" in result and "…" in result


def test_no_passages_says_so() -> None:
    assert "No knowledge-base passages" in format_passages("zebra", [], 1000)
