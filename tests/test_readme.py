"""The README documents every setting."""

from pathlib import Path

from app.settings import environment_variables

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_setting_is_in_the_readme() -> None:
    missing = sorted(name for name in environment_variables() if f"`{name}`" not in README)
    assert missing == []
