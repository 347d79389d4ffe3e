"""Every command's and group's `--help` at 80 columns: lines that fit, summaries of the
commands that are whole sentences (never cut with "..."), and usage lines in click's words
(`PATH`, not Typer's `{path}`)."""

from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from app.cli import cli

runner = CliRunner()


def every_command() -> Iterator[list[str]]:
    def walk(command: Any, path: list[str]) -> Iterator[list[str]]:
        yield path
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, [*path, name])

    yield from walk(typer.main.get_command(cli), [])


def help_at_80_columns(words: list[str]) -> list[str]:
    shown = runner.invoke(cli, [*words, "--help"], env={"COLUMNS": "80"})
    assert shown.exit_code == 0, shown.output
    return shown.output.splitlines()


@pytest.mark.parametrize("words", [pytest.param(w, id=" ".join(w) or "-") for w in every_command()])
def test_help_reads_cleanly_at_80_columns(words: list[str]) -> None:
    lines = help_at_80_columns(words)
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    usage = lines[0]
    assert usage.startswith("Usage: ") and "{" not in usage, usage
    if "Commands:" in lines:
        listed = lines[lines.index("Commands:") + 1 :]
        assert listed and not any(line.endswith("...") for line in listed), "\n".join(lines)


def test_a_required_argument_is_named_in_capitals() -> None:
    assert help_at_80_columns(["kb", "ingest"])[0].endswith(" kb ingest [OPTIONS] PATH")
    usage = help_at_80_columns(["conversations", "set-profile"])[0]
    assert usage.endswith(" set-profile [OPTIONS] KEY PROFILE")


def test_a_long_summary_is_wrapped_whole() -> None:
    lines = help_at_80_columns(["kb"])
    listed = "\n".join(lines[lines.index("Commands:") + 1 :])
    assert " ".join(listed.split()).count("files that are gone are removed") == 1
