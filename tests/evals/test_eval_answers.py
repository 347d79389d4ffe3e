"""`supportbot eval answers` on a tiny scenario over the sample knowledge base."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from app.cli import cli
from app.settings import get_settings

SCENARIO = {
    "name": "tiny_help_desk",
    "audience": "client",
    "turns": [
        {"id": 1, "user": "Ann", "text": "Hi there 👋", "kind": "smalltalk"},
        {
            "id": 2,
            "user": "Ann",
            "text": "How do I create an invoice?",
            "kind": "question",
            "gold": ["en/create-invoice.md"],
            "facts": ["Sales → Invoices → New invoice", "Choose a customer", "Save and send"],
        },
        {
            "id": 3,
            "user": "Bob",
            "text": "What will the weather be like in Berlin tomorrow?",
            "kind": "out_of_scope",
            "facts": ["says the documentation does not cover it"],
        },
    ],
}


@pytest.fixture
def configured_kb(sample_index: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The settings' knowledge base is the sample one, already ingested (no --kb)."""
    monkeypatch.setenv("SUPPORTBOT_KNOWLEDGE__QDRANT_PATH", str(sample_index))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_answers_are_scored_per_turn_and_summed_up(configured_kb: None, tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO, allow_unicode=True), encoding="utf-8")
    out = tmp_path / "answers.json"

    result = CliRunner().invoke(
        cli,
        ["eval", "answers", "--scenario", str(scenario), "--out", str(out)],
        env={"COLUMNS": "200"},
    )

    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "tiny_help_desk" in line)
    cells = [cell.strip() for cell in row.strip("│┃ ").split("│")]
    assert cells[:6] == ["tiny_help_desk", "3", "100% of 1", "0% of 1", "100%", "100% of 1"]
    turns = json.loads(out.read_text(encoding="utf-8"))
    assert [(t["turn"], t["kind"], t["searches"], t["says_not_found"]) for t in turns] == [
        ("1", "smalltalk", 0, False),
        ("2", "question", 1, False),
        ("3", "out_of_scope", 1, True),
    ]
    assert turns[0]["answer"].startswith("Glad to help!")
    assert "1. Go to Sales → Invoices → New invoice." in turns[1]["answer"]
    assert "Users and roles" not in turns[2]["answer"]
    # the reply says the documentation does not cover it: the out-of-scope turn's fact
    assert turns[1]["fact_coverage"] == turns[2]["fact_coverage"] == 1.0
