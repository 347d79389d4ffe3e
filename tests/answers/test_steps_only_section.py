"""A section that is only numbered steps, its heading naming what they do, on a team's own
documentation with the shipped defaults (the offline model): the answer is those steps,
never "I could not find this" while the turn counts as answered and cites the page."""

from pathlib import Path

import pytest

from app.settings import Settings
from knowledge.store import KnowledgeBase
from tests.conftest import make_client

BACKUP_PAGE = """# Your company's data

Everything recorded in the company stays yours. The owner can take a copy of invoices,
customers, payments and attachments at any time, and ask for the company to be closed.

## Download a backup

1. Open **Settings → Company → Data**.
2. Press **Prepare**: preparing takes a few minutes for large companies.
3. When the email arrives, follow its link and keep the ZIP file it gives you.

## Close the company

Closing the company deletes its records after 30 days. Only the owner can close it, from
**Settings → Company → Close company**, after typing the company's name to confirm.
"""
INVOICES_PAGE = """# Invoices

An invoice lists what a customer owes: its lines, the tax on each line and the due date.
Draft invoices can be edited; a sent invoice can only be credited.

## Send an invoice

Open the invoice and press **Send**: the customer gets an email with a link to the
invoice and a PDF copy. The invoice's status changes to Sent.
"""


@pytest.fixture
def own_index(tmp_path: Path) -> Path:
    folder = tmp_path / "helpcenter"
    folder.mkdir()
    (folder / "company-data.md").write_text(BACKUP_PAGE, "utf-8")
    (folder / "invoices.md").write_text(INVOICES_PAGE, "utf-8")
    index = tmp_path / "own-qdrant"
    knowledge = KnowledgeBase.from_settings(
        Settings(_env_file=None).knowledge.model_copy(update={"qdrant_path": index})
    )
    try:
        knowledge.ingest(folder)
    finally:
        knowledge.close()
    return index


def test_a_section_of_steps_alone_is_answered_with_its_steps(
    settings: Settings, own_index: Path
) -> None:
    with make_client(settings, own_index) as api:
        response = api.post(
            "/v1/conversations/api:backup/messages",
            json={"audience": "client", "author": "Ann", "text": "How do I download a backup?"},
        )
    assert response.status_code == 200, response.text
    reply = response.json()

    assert reply["outcome"] == "answered", reply
    assert "1. Open Settings → Company → Data." in reply["text"], reply["text"]
    assert "3. When the email arrives" in reply["text"]
    assert "Download a backup" in reply["text"]  # the section it quotes is named
    assert [c["source"] for c in reply["citations"]][:1] == ["company-data.md"]
