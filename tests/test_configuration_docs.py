"""docs/configuration.md is written from the settings models and checked against them: a
setting added, renamed, re-defaulted or left without a description fails here."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from app import config_docs
from app.cli import cli
from app.settings import SOURCE_ROOT, DbSettings, environment_variables

runner = CliRunner()


def test_the_committed_page_is_what_the_models_give() -> None:
    committed = config_docs.DOC_PATH.read_text(encoding="utf-8")
    assert committed == config_docs.render(), (
        "docs/configuration.md differs from app/settings.py: run `supportbot docs config`"
    )
    checked = runner.invoke(cli, ["docs", "config", "--check"])
    assert checked.exit_code == 0, checked.output


def test_every_setting_has_a_description() -> None:
    assert config_docs.undocumented() == []


def test_every_variable_has_a_row() -> None:
    page = config_docs.render()
    rows = {line.split("`")[1] for line in page.splitlines() if line.startswith("| `")}
    assert rows == environment_variables()


def test_a_field_without_a_description_stops_the_generator(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(DbSettings.model_fields["echo"], "description", None)
    assert config_docs.undocumented() == ["SUPPORTBOT_DB__ECHO"]
    page = tmp_path / "configuration.md"
    assert config_docs.run(check=False, path=page) == 1
    assert "SUPPORTBOT_DB__ECHO" in capsys.readouterr().err
    assert not page.exists()


def test_check_fails_when_the_page_drifted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "configuration.md"
    assert config_docs.run(check=True, path=page) == 1
    assert "does not exist" in capsys.readouterr().err
    assert config_docs.run(check=False, path=page) == 0
    assert config_docs.run(check=True, path=page) == 0
    page.write_text(page.read_text().replace("`8192`", "`4096`"))
    assert config_docs.run(check=True, path=page) == 1
    assert "supportbot docs config" in capsys.readouterr().err


def test_the_page_is_the_same_on_every_machine_and_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    page = config_docs.render()
    monkeypatch.setenv("SUPPORTBOT_HOME", "/somewhere/else")
    monkeypatch.setenv("SUPPORTBOT_DB__POOL_SIZE", "3")
    assert config_docs.render() == page
    assert str(SOURCE_ROOT) not in page
    assert "| `SUPPORTBOT_KNOWLEDGE__SAMPLE_PATH` | path | `knowledge/sample_kb` |" in page
    assert "| `SUPPORTBOT_DB__POOL_SIZE` | int, ≥ 1 | `10` |" in page
