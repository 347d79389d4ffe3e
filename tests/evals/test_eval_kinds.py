"""`supportbot eval kinds`: the kind rule of remembered facts on labelled statement pairs,
per language. The rule was tuned on the calibration pairs (held out: heldout.yaml)."""

from pathlib import Path

import yaml
from typer.testing import CliRunner

from app.cli import cli
from evals.kinds import CALIBRATION, accuracy, judge, load_pairs


def test_the_calibration_pairs_but_one_get_their_kinds_right() -> None:
    found = {a.lang: (a.right, a.pairs) for a in accuracy(judge(load_pairs(CALIBRATION)))}
    assert found == {"en": (10, 10), "de": (20, 21), "ru": (20, 20), "all": (50, 51)}
    # The one: a pronoun with "is" has its value as the kind (as "I'm on Windows" does).
    (miss,) = [j for j in judge(load_pairs(CALIBRATION)) if not j.right]
    assert (miss.older_kind, miss.newer_kind) == ("be gmbh", "be ag")


def test_the_command_reports_each_language_and_the_misses(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.yaml"
    labelled = [
        {"lang": "de", "same": True, "older": "Unsere Währung ist EUR",
         "newer": "Unsere Währung ist CHF"},
        {"lang": "ru", "same": True, "older": "Я на Windows", "newer": "Я на macOS"},
    ]  # fmt: skip
    pairs.write_text(yaml.safe_dump({"pairs": labelled}, allow_unicode=True), encoding="utf-8")
    result = CliRunner().invoke(cli, ["eval", "kinds", "--pairs", str(pairs), "--wrong"])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("│")]
    assert [row.split("│")[1].strip() for row in rows] == ["de", "ru", "all"]
    assert "1 (100%)" in rows[0] and "0 (0%)" in rows[1] and "1 (50%)" in rows[2]
    assert "ru (one kind): 'Я на Windows'" in result.output
