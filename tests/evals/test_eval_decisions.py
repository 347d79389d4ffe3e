"""`supportbot eval decisions` on a few labelled messages over the sample knowledge base:
per language, what was handed over, answered as small talk, told "not in the docs", and
the language identified; the figures count what the service decided."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from app.cli import cli
from app.settings import SOURCE_ROOT, DecisionSettings, get_settings
from evals.decisions import HELDOUT, in_sample

MESSAGES = [
    {"id": "p1", "text": "I want to talk to a real person", "language": "en", "intent": "person"},
    {"id": "p2", "text": "Позовите, пожалуйста, оператора", "language": "ru", "intent": "person"},
    {"id": "s1", "text": "Thanks a lot!", "language": "en", "intent": "smalltalk"},
    {
        "id": "q1",
        "text": "How do I send an invoice to a customer?",
        "language": "en",
        "intent": "question",
        "docs": "answerable",
    },
    {
        "id": "q2",
        "text": "Who won the football world cup in 1954?",
        "language": "en",
        "intent": "question",
        "docs": "unanswerable",
    },
    {
        "id": "q3",
        "text": "Hello, my invoice shows the wrong total after saving.",
        "language": "en",
        "intent": "question",
    },
]


@pytest.fixture
def configured_kb(sample_index: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SUPPORTBOT_KNOWLEDGE__QDRANT_PATH", str(sample_index))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def row(output: str, label: str) -> list[str]:
    line = next(line for line in output.splitlines() if label in line)
    return [cell.strip() for cell in line.replace("┃", "│").strip("│ ").split("│")]


def test_labelled_messages_are_routed_and_counted_per_language(
    configured_kb: None, tmp_path: Path
) -> None:
    path = tmp_path / "messages.yaml"
    path.write_text(yaml.safe_dump({"messages": MESSAGES}, allow_unicode=True), encoding="utf-8")
    out = tmp_path / "decisions.json"

    result = CliRunner().invoke(
        cli, ["eval", "decisions", "--messages", str(path), "--out", str(out)]
    )

    assert result.exit_code == 0, result.output
    assert row(result.output, "figure")[1:] == ["en", "ru", "all"]
    assert row(result.output, "product questions handed over (offline)")[1:] == [
        "0/3 (0%)", "0/0", "0/3 (0%)"
    ]  # fmt: skip
    assert row(result.output, "requests for a person handed over (offline)")[3] == "2/2 (100%)"
    assert row(result.output, "problem reports answered as small talk")[3] == "0/3 (0%)"
    assert row(result.output, "small-talk precision")[3] == "1/1 (100%)"
    assert row(result.output, "answerable refused")[3] == "0/1 (0%)"
    assert row(result.output, "language identified")[3] == "6/6 (100%)"
    decided = {d["id"]: d for d in json.loads(out.read_text(encoding="utf-8"))}
    assert decided["p2"]["hands_over"] and decided["p2"]["language"] == "ru"
    assert decided["s1"]["smalltalk"] and not decided["q3"]["smalltalk"]
    assert decided["q1"]["not_in_docs"] is False and decided["q3"]["not_in_docs"] is None


def test_by_set_holds_each_labelled_set_out_in_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sets = [
        [
            ("Put me through to a person, please", "person"),
            ("I need somebody from support on the phone", "person"),
            ("How do I reconcile my bank account?", "question"),
        ],
        [
            ("Verbinden Sie mich mit einem Mitarbeiter", "person"),
            ("Where do I change the tax rate?", "question"),
            ("Как создать счёт?", "question"),
        ],
    ]
    paths = []
    for number, labelled in enumerate(sets):
        path = tmp_path / f"set_{number}.yaml"
        messages = [{"id": str(i), "text": t, "intent": k} for i, (t, k) in enumerate(labelled)]
        path.write_text(yaml.safe_dump({"messages": messages}, allow_unicode=True), "utf-8")
        paths.append(str(path))
    monkeypatch.setenv("SUPPORTBOT_DECISIONS__PERSON_EXAMPLES", json.dumps(paths))
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(cli, ["eval", "decisions", "--by-set"])
    finally:
        get_settings.cache_clear()

    assert result.exit_code == 0, result.output
    requests, questions = row(result.output, "0.45")[1:]
    assert requests.split()[0] == "3/3" and questions.split()[0] == "0/3"


def test_by_default_the_set_that_trained_nothing_is_reported() -> None:
    result = CliRunner().invoke(cli, ["eval", "decisions", "--no-search"])

    assert result.exit_code == 0, result.output
    assert "heldout_20.yaml" in result.output
    assert "in-sample" not in result.output


def test_a_set_the_person_head_is_fitted_to_is_reported_as_in_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(SOURCE_ROOT / "app")
    result = CliRunner().invoke(
        cli,
        ["eval", "decisions", "--no-search", "--messages", "decisions/labelled/heldout_2.yaml"],
    )

    assert result.exit_code == 0, result.output
    assert (
        "the figures are in-sample: the person head is fitted to heldout_2.yaml "
        "(decisions.person_examples)"
    ) in result.output.splitlines()


def test_in_sample_is_one_of_the_fitted_files_not_a_name(tmp_path: Path) -> None:
    fitted = DecisionSettings().person_examples
    assert in_sample(fitted[0], fitted)
    assert in_sample(fitted[0].parent / ".." / "labelled" / fitted[0].name, fitted)
    assert not in_sample(HELDOUT, fitted)
    assert not in_sample(tmp_path / fitted[0].name, fitted)
