"""A real model's search in a language no page is written in, end to end (the sample
knowledge base: English and Russian pages): the page that answers is among the first three
the search tool gives the provider."""

from pathlib import Path

from app.bench.scripted_llm import Fault
from app.settings import Settings
from tests.agent.model_search import searched, sources

# A German question of the sample's development set: e5 alone does not find its page among
# the first three (tests/knowledge/test_crosslingual.py).
GERMAN = (
    "Ich habe einen großen Export angestoßen und einen Download-Link per Mail bekommen. "
    "Wie lange ist der gültig?"
)


def test_a_german_search_over_english_and_russian_pages_gets_the_answering_page(
    settings: Settings, sample_index: Path
) -> None:
    result, faults = searched(settings, sample_index, GERMAN)
    assert faults == [str(Fault.SERVER_ERROR)]  # the 500 was retried, the turn went on
    assert "en/reports.md" in sources(result)[:3], result


def test_without_the_multilingual_view_the_page_is_not_among_the_first_three(
    settings: Settings, sample_index: Path
) -> None:
    settings.knowledge.crosslingual_weight = 0.0
    result, _ = searched(settings, sample_index, GERMAN)
    assert "en/reports.md" not in sources(result)[:3], result
