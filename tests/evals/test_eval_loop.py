"""`supportbot eval loop` on a tiny week over the sample knowledge base: two gap topics
the documentation does not answer and one question it does. Day 1 answers neither topic;
the team answers the gap report's groups; day 2 resolves both, asked again, and the
control cites no saved answer."""

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from app.cli import cli
from evals.loop import Asked, GapTopic, Served, day_questions, load_week
from evals.own_docs import Question, ScoredQuestion

STRIPE = "Payouts are imported every night at 2 AM"
API = "up to 600 requests a minute"
TINY_WEEK: dict[str, Any] = {
    "corpus": "sample",
    "gaps": [
        {
            "topic": "stripe",
            "language": "en",
            "answer": "Yes: open **Settings → Integrations → Stripe** and click Connect. "
            f"{STRIPE}.",
            "fact": STRIPE,
            "day1": [
                {"text": "Does Ledgerly connect to Stripe?", "language": "en"},
                {"text": "Can I link my Stripe account to Ledgerly?", "language": "en"},
            ],
            "day2": [{"text": "Is there a Stripe integration?", "language": "en"}],
        },
        {
            "topic": "api",
            "language": "en",
            "answer": f"Yes: create a key under **Settings → API keys**; the REST API takes {API}.",
            "fact": API,
            "day1": [
                {"text": "Do you have a public API?", "language": "en"},
                {"text": "Is there a REST API for Ledgerly?", "language": "en"},
            ],
            "day2": [{"text": "Gibt es eine Programmierschnittstelle?", "language": "de"}],
        },
    ],
    "controls": {
        "answerable": [
            {
                "text": "How do I create an invoice?",
                "language": "en",
                "answers": [{"page": "en/create-invoice.md", "facts": ["New invoice"]}],
            }
        ]
    },
}


def test_saved_answers_resolve_on_day_2_what_day_1_did_not(tmp_path: Path) -> None:
    week = tmp_path / "tiny.yaml"
    week.write_text(yaml.safe_dump(TINY_WEEK, allow_unicode=True), encoding="utf-8")
    out = tmp_path / "loop.json"

    result = CliRunner().invoke(
        cli, ["eval", "loop", "--week", str(week), "--out", str(out)], env={"COLUMNS": "200"}
    )

    assert result.exit_code == 0, result.output
    dumped = json.loads(out.read_text(encoding="utf-8"))
    replies = dumped["replies"]
    gap = [(r["day"], r["wording"], r["resolved"]) for r in replies if r["kind"] == "gap"]
    assert [(day, resolved) for day, wording, resolved in gap if wording == "asked"] == [
        (1, False)
    ] * 4
    assert [(day, resolved) for day, wording, resolved in gap if wording == "again"] == [
        (2, True)
    ] * 4
    # One answer per topic, every day-1 question saved as its question or a wording (a
    # topic the report splits in two groups gets the second group's as wordings).
    assert sorted(s["topic"] for s in dumped["saved"] if s["added"]) == ["api", "stripe"]
    asked = [q["text"] for topic in TINY_WEEK["gaps"] for q in topic["day1"]]
    assert sorted(q for s in dumped["saved"] for q in s["questions"]) == sorted(asked)
    (control_1, control_2) = [r for r in replies if r["kind"] == "answerable"]
    assert not any(c.startswith("answers/") for c in control_1["cited"] + control_2["cited"])
    assert (control_1["outcome"], control_1["verdict"]) == (
        control_2["outcome"],
        control_2["verdict"],
    )
    row = next(line for line in result.output.splitlines() if line.strip("│┃ ").startswith("all"))
    cells = [cell.strip() for cell in row.strip("│┃ ").split("│")]
    assert cells[1:3] == ["0/4", "4/4"]
    # The control cites no saved answer, quoted or offered, and is answered as on day 1.
    assert cells[7:9] == ["0 + 0 offered of 2", "1/1"]
    assert "it should not" not in result.output


def test_a_reply_is_resolved_only_with_the_fact_and_a_team_citation(tmp_path: Path) -> None:
    week = tmp_path / "tiny.yaml"
    week.write_text(yaml.safe_dump(TINY_WEEK, allow_unicode=True), encoding="utf-8")
    topic: GapTopic = load_week(week).gaps[0]
    question = Question("Does Ledgerly connect to Stripe?", "en")

    def served(reply: str, cited: tuple[str, ...], outcome: str = "answered") -> Served:
        scored = ScoredQuestion(question, "answered", outcome, reply, cited)
        return Served(Asked(question, "gap", topic, "again"), scored)

    assert served(f"Yes. **{STRIPE}**.", ("answers/1",)).resolved
    assert not served(f"{STRIPE}.", ("en/bank-import.md",)).resolved  # not the team's
    assert not served("Settings → Integrations.", ("answers/1",)).resolved  # no fact
    unsure = served("I am not sure the documentation answers this.", ("answers/1",), "not_found")
    assert unsure.cites_team_answer and not unsure.quotes_team_answer and not unsure.resolved


def test_day_two_asks_the_day_one_questions_again_and_tells_the_new_wordings_apart(
    tmp_path: Path,
) -> None:
    week = tmp_path / "tiny.yaml"
    week.write_text(yaml.safe_dump(TINY_WEEK, allow_unicode=True), encoding="utf-8")
    loaded = load_week(week)

    day2 = [(a.kind, a.wording, a.question.language) for a in day_questions(loaded, 2)]

    assert day2 == [
        *[("gap", "again", "en")] * 2,
        ("gap", "reworded", "en"),
        *[("gap", "again", "en")] * 2,
        ("gap", "other_language", "de"),
        ("answerable", "", "en"),
    ]
    assert [a.wording for a in day_questions(loaded, 1)][:4] == ["asked"] * 4
