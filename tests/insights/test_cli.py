"""`supportbot insights gaps`: the seeded report as a table and as JSON."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.db import migrate
from app.settings import get_settings
from knowledge.relevance import load_questions

from .seed import BANK_SYNC, MOBILE_APP, known_outcomes, seed

RATED = "How do I change the number format of my invoices?"  # answered, then a 👎

runner = CliRunner()


@pytest.fixture
def seeded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("SUPPORTBOT_DB__URL", url)
    get_settings.cache_clear()
    migrate.upgrade(url)
    seed(url, known_outcomes())
    yield url
    get_settings.cache_clear()


def test_gaps_as_json_and_as_a_table(seeded: str) -> None:
    found = runner.invoke(cli, ["insights", "gaps", "--since", "7d", "--json"])
    assert found.exit_code == 0, found.output
    report = json.loads(found.output)
    assert report["questions"] == 10  # the request for a person is no gap
    counts = [group["count"] for group in report["groups"]]
    assert counts == sorted(counts, reverse=True) and counts[0] == 5
    mobile = next(g for g in report["groups"] if g["name"] in MOBILE_APP)
    assert mobile["count"] == 4 and mobile["pages"] == []

    own = runner.invoke(cli, ["insights", "gaps", "--json", "--prefix", "api:acme:"])
    assert json.loads(own.output)["questions"] == 9

    table = runner.invoke(cli, ["insights", "gaps", "--since", "7d"], env={"COLUMNS": "240"})
    assert table.exit_code == 0, table.output
    assert "10 questions" in table.output and mobile["name"] in table.output
    assert "none: write one" in table.output


def test_a_bad_period_is_refused(seeded: str) -> None:
    refused = runner.invoke(cli, ["insights", "gaps", "--since", "week"])
    assert refused.exit_code == 2 and "7d" in refused.output


def test_the_questions_go_to_a_file_to_review_for_the_documentations_scope(
    seeded: str, tmp_path: Path
) -> None:
    """What a person reviews and adds to the scope's labelled questions: the questions the
    documentation did not answer, not the request for a person, read by `kb calibrate`'s
    own reader."""
    review = tmp_path / "review.yaml"
    written = runner.invoke(cli, ["insights", "questions", str(review), "--prefix", "api:acme:"])
    assert written.exit_code == 0, written.output
    labelled = load_questions(review)
    texts = [question.text for question in labelled]
    assert sorted(texts) == sorted([*BANK_SYNC, *MOBILE_APP, RATED])
    assert not any(question.answerable for question in labelled)  # proposed, to be checked
    languages = {question.text: question.language for question in labelled}
    assert languages[BANK_SYNC[0]] == "en" and languages[BANK_SYNC[2]] == "ru"
    assert review.read_text(encoding="utf-8").startswith("# Questions the bot did not answer")

    unwritable = runner.invoke(cli, ["insights", "questions", str(tmp_path / "none" / "r.yaml")])
    assert unwritable.exit_code == 1 and "cannot write" in unwritable.output
