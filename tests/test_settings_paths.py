"""Relative paths in the settings resolve against SUPPORTBOT_HOME, not the working directory."""

import json
from pathlib import Path
from typing import Any

import pytest

from app.settings import SOURCE_ROOT, DbSettings, KnowledgeSettings, Settings, default_home


def _settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)


def test_relative_defaults_resolve_under_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = _settings(home=tmp_path / "home")
    assert settings.home == tmp_path / "home"
    assert settings.knowledge.qdrant_path == tmp_path / "home" / "var" / "qdrant"
    assert settings.db.url == f"sqlite:///{tmp_path}/home/var/supportbot.db"
    # The sample ships with the code: its default does not depend on the home.
    assert settings.knowledge.sample_path == SOURCE_ROOT / "knowledge" / "sample_kb"


def test_relative_values_resolve_under_home_and_absolute_ones_stay(tmp_path: Path) -> None:
    settings = _settings(
        home=tmp_path,
        knowledge=KnowledgeSettings(qdrant_path=Path("/srv/qdrant"), sample_path=Path("docs")),
        db=DbSettings(url="sqlite+aiosqlite:///data/bot.db?timeout=5"),
    )
    assert settings.knowledge.qdrant_path == Path("/srv/qdrant")
    assert settings.knowledge.sample_path == tmp_path / "docs"
    assert settings.db.url == f"sqlite+aiosqlite:///{tmp_path}/data/bot.db?timeout=5"


@pytest.mark.parametrize(
    "url",
    ["sqlite:////var/lib/bot.db", "sqlite://", "sqlite:///:memory:", "postgresql://u:p@h/db"],
)
def test_urls_without_a_relative_file_are_kept(url: str, tmp_path: Path) -> None:
    assert _settings(home=tmp_path, db=DbSettings(url=url)).db.url == url


def test_home_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPPORTBOT_HOME", str(tmp_path))
    monkeypatch.setenv("SUPPORTBOT_KNOWLEDGE__QDRANT_PATH", "store")
    assert _settings().knowledge.qdrant_path == tmp_path / "store"


def test_the_default_home_is_the_checkout_the_code_runs_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SUPPORTBOT_HOME", raising=False)
    assert (SOURCE_ROOT / "pyproject.toml").is_file()  # these tests run from a checkout
    assert default_home() == SOURCE_ROOT
    assert _settings().home == SOURCE_ROOT


def test_an_installed_package_defaults_to_the_user_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.settings.home

    monkeypatch.setattr(app.settings.home, "SOURCE_ROOT", tmp_path / "site-packages")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_home() == tmp_path / "data" / "supportbot"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert default_home() == tmp_path / "user" / ".local" / "share" / "supportbot"


def test_a_scheduled_folder_resolves_under_home_and_a_site_stays_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = [
        {"location": "docs", "every_hours": 6},
        {"location": "https://help.example.com/docs/", "collection": "web", "every_hours": 0.5},
    ]
    monkeypatch.setenv("SUPPORTBOT_KNOWLEDGE__SOURCES", json.dumps(sources))
    settings = _settings(home=tmp_path)
    assert [(s.location, s.collection, s.every_hours) for s in settings.knowledge.sources] == [
        (str(tmp_path / "docs"), "kb", 6.0),  # the configured collection when unset
        ("https://help.example.com/docs/", "web", 0.5),
    ]
