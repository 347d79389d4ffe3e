"""A passage holding part of what is asked, end to end on the sample knowledge base: a real
model, which reads it, is handed it as a passage; the offline model, which would quote it
as the answer, offers the pages (tests/answers/test_own_documentation.py)."""

from pathlib import Path

from app.agent.tools import NOTHING_ANSWERS
from app.settings import Settings
from tests.agent.model_search import searched

# "Edit a customer" holds "customer" and "update" of it, nothing of invoices already sent.
MOVED = (
    "Our customer moved offices. If I update his address, do the invoices we already sent "
    "change too?"
)


def test_a_real_model_is_handed_the_passage_that_holds_part_of_the_question(
    settings: Settings, sample_index: Path
) -> None:
    result, _ = searched(settings, sample_index, MOVED)
    assert NOTHING_ANSWERS not in result
    assert "en/customers.md" in result and "click **Save**" in result, result
