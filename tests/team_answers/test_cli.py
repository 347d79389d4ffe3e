"""`supportbot answers list | export FILE | import FILE`: an export imported into another
install's database and knowledge base answers there; a file that is no list of answers is
refused with one line."""

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from app.cli import cli
from app.settings import get_settings
from knowledge.store import KnowledgeBase
from tests.team_answers.conftest import PAYPAL

runner = CliRunner()


def use_install(monkeypatch: pytest.MonkeyPatch, folder: Path, sample_index: Path) -> None:
    """A database and a copy of the sample knowledge base under `folder`."""
    shutil.copytree(sample_index, folder / "qdrant")
    monkeypatch.setenv("SUPPORTBOT_DB__URL", f"sqlite:///{folder / 'cli.db'}")
    monkeypatch.setenv("SUPPORTBOT_KNOWLEDGE__QDRANT_PATH", str(folder / "qdrant"))
    get_settings.cache_clear()
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0


def test_answers_exported_from_one_install_answer_in_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sample_index: Path
) -> None:
    try:
        use_install(monkeypatch, tmp_path / "first", sample_index)
        written = tmp_path / "mine.json"
        written.write_text(json.dumps({"answers": [PAYPAL | {"enabled": False}]}))
        assert runner.invoke(cli, ["answers", "import", str(written)]).output == (
            "answers: +1 added, ~0 updated, indexed\n"
        )
        again = runner.invoke(cli, ["answers", "import", str(written)])
        assert again.output == "answers: +0 added, ~1 updated, indexed\n"
        listed = runner.invoke(cli, ["answers", "list"])
        assert listed.output == f"1\tdisabled\tkb\ten\t{PAYPAL['question']}\n"
        exported = tmp_path / "answers.yaml"
        assert runner.invoke(cli, ["answers", "export", str(exported)]).exit_code == 0
        (row,) = yaml.safe_load(exported.read_text())["answers"]
        assert row["variants"] == PAYPAL["variants"] and row["enabled"] is False
        row["enabled"] = True
        exported.write_text(yaml.safe_dump({"answers": [row]}, allow_unicode=True))

        use_install(monkeypatch, tmp_path / "second", sample_index)
        imported = runner.invoke(cli, ["answers", "import", str(exported)])
        assert imported.exit_code == 0, imported.output
        assert runner.invoke(cli, ["answers", "list"]).output.startswith("1\tin use\tkb\ten\t")
        knowledge = KnowledgeBase.from_settings(get_settings().knowledge)
        try:
            (found, *_) = knowledge.search("Do you accept PayPal?", 4)
        finally:
            knowledge.close()
        assert found.source == "answers/1" and found.title.startswith("Support team answer (")
    finally:
        get_settings.cache_clear()


def test_a_file_that_holds_no_answers_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sample_index: Path
) -> None:
    try:
        use_install(monkeypatch, tmp_path, sample_index)
        wrong = tmp_path / "wrong.yaml"
        wrong.write_text("answers:\n  - question: Hello?\n")
        refused = runner.invoke(cli, ["answers", "import", str(wrong)])
        assert refused.exit_code == 2
        assert "holds no `answers:` list of question and answer" in refused.output
        other = runner.invoke(cli, ["answers", "export", str(tmp_path / "answers.csv")])
        assert other.exit_code == 2 and "neither .yaml, .yml nor .json" in other.output
        assert runner.invoke(cli, ["answers", "list"]).output == "no answers yet\n"
    finally:
        get_settings.cache_clear()
