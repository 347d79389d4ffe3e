"""The eval harness end to end: a 5-turn scenario, two profiles, the sample knowledge base."""

import json
from pathlib import Path

import pytest
import yaml
from langchain_core.messages import HumanMessage

from app.agent.memory.decisions import message_tokens
from app.observability.simulator import request_tokens
from app.settings import Settings
from evals.harness import EvalConfig, evaluate, open_knowledge
from tests.fakes import CapturingChatModel

SCENARIO = {
    "name": "five_turns",
    "audience": "client",
    "turns": [
        {
            "id": 1,
            "user": "Ann",
            "text": "We are a German company and bill in EUR. Please keep answers short. "
            "How do I create an invoice?",
            "kind": "constraint",
            "gold": ["en/create-invoice.md"],
            "facts": ["Sales → Invoices → New invoice"],
        },
        {
            "id": 2,
            "user": "Bob",
            "text": "How do I record a payment for an invoice?",
            "kind": "question",
            "gold": ["en/record-payment.md"],
            "facts": ["Record payment"],
        },
        {
            "id": 3,
            "user": "Bob",
            "text": "what if they only paid part of it?",
            "kind": "followup",
            "refers_to": 2,
            "gold": ["en/record-payment.md"],
        },
        {
            "id": 4,
            "user": "Ann",
            "text": "Which tax rates do we need to set up?",
            "kind": "probe",
            "refers_to": 1,
            "gold": ["en/tax-rates.md"],
        },
        {
            "id": 5,
            "user": "Ann",
            "text": "back to invoices: can the invoice numbers get a prefix?",
            "kind": "return",
            "refers_to": 1,
            "gold": ["en/invoice-numbering.md"],
            "gap_minutes": 10,
        },
    ],
}
PROFILES = ["baseline", "trim-naive"]
SUMMARY_KEYS = {
    "context_tokens_last",
    "input_tokens",
    "cached_tokens",
    "cached_share",
    "cost_usd",
    "lower_bound_cost_usd",
    "tool_calls",
    "re_searches",
    "gold_hit_rate",
    "constraint_kept",
    "cache_source",
}


@pytest.fixture
def config(tmp_path: Path) -> EvalConfig:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO, allow_unicode=True), encoding="utf-8")
    # Caching from 16 tokens: a turn's requests over the sample's one-section passages can
    # stay under a provider's 1,024-token minimum, and every turn should show its reuse.
    return EvalConfig(
        scenario=scenario, profiles=PROFILES, out=tmp_path / "out", provider_rules="block16"
    )


def test_a_short_scenario_reports_consistent_numbers(
    settings: Settings, sample_index: Path, config: EvalConfig
) -> None:
    settings.knowledge.qdrant_path = sample_index
    models: list[CapturingChatModel] = []

    def capturing_model(repeat: int) -> CapturingChatModel:
        models.append(CapturingChatModel(searches_per_question=(2, 2)))
        return models[-1]

    knowledge, ingested = open_knowledge(settings, config)
    try:
        evaluate(settings, config, knowledge, model_for_repeat=capturing_model)
    finally:
        knowledge.close()

    assert ingested is None  # no --kb: the configured knowledge base as it is
    out = config.out
    names = {"report.md", "summary.json", "turns.json"}
    names |= {"context_tokens.png", "cumulative_cost.png", "cached_share.png"}
    assert names <= {p.name for p in out.iterdir()}
    assert all((out / name).stat().st_size > 0 for name in names)
    report = (out / "report.md").read_text()
    assert all(f"| {profile} |" in report for profile in PROFILES)
    assert "searches per user message" in report  # the shape stands next to the table

    summary = json.loads((out / "summary.json").read_text())
    rows = json.loads((out / "turns.json").read_text())
    assert list(summary) == PROFILES
    assert len(rows) == 5 * len(PROFILES)
    for profile, model in zip(PROFILES, models, strict=True):
        figures = summary[profile]
        assert set(figures) >= SUMMARY_KEYS
        mine = [r for r in rows if r["profile"] == profile]
        assert [r["turn"] for r in mine] == ["1", "2", "3", "4", "5"]
        for row in mine:
            # Each turn's later requests reuse its first one's prefix; no request is all cached.
            assert 0 < row["cached_tokens"] < row["input_tokens"]
            parts = row["cost_agent_usd"] + row["cost_summary_usd"] + row["cost_expert_usd"]
            assert row["cost_usd"] == pytest.approx(parts)
            assert 0 < row["lower_bound_cost_usd"] <= row["cost_usd"] + 1e-12
            assert row["searches"] == 2  # the shape asked for
        assert figures["input_tokens"] == sum(r["input_tokens"] for r in mine)
        assert figures["cached_tokens"] == sum(r["cached_tokens"] for r in mine)
        assert figures["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in mine))
        assert mine[-1]["cumulative_cost_usd"] == pytest.approx(figures["cost_usd"])
        assert figures["tool_calls"] == sum(r["tool_calls"] for r in mine) == 10
        assert figures["cache_source"] == "simulated"
        assert figures["gold_hit_rate"] == 1.0  # the sample knowledge base has every gold page

        # Context tokens are what the model received at the start of each turn.
        first_requests = [c for c in model.calls if isinstance(c.messages[-1], HumanMessage)]
        assert [r["context_tokens"] for r in mine] == [
            sum(message_tokens(m) for m in c.messages) for c in first_requests
        ]
        assert figures["context_tokens_last"] == mine[-1]["context_tokens"]
        # Neither profile summarizes: every input token is one the agent's model was sent.
        assert figures["input_tokens"] == sum(
            len(request_tokens(c.messages, c.tools)) for c in model.calls
        )

    baseline, trimmed = summary["baseline"], summary["trim-naive"]
    assert baseline["constraint_kept"] == 1.0  # keeping everything keeps the constraint
    assert (baseline["prefix_changes"], trimmed["prefix_changes"]) == (0, 3)
    # Trimming sends fewer tokens and so costs less over five turns, but a smaller share of
    # them is cached: it rewrites the prefix the baseline keeps.
    assert trimmed["input_tokens"] < baseline["input_tokens"]
    assert trimmed["cost_vs_baseline"] == pytest.approx(trimmed["cost_usd"] / baseline["cost_usd"])
    assert trimmed["cost_vs_baseline"] < 1
    assert trimmed["cached_share"] < baseline["cached_share"]


def test_a_turn_asking_for_a_person_reports_the_handoff_card_apart(
    settings: Settings, sample_index: Path, tmp_path: Path
) -> None:
    settings.knowledge.qdrant_path = sample_index
    asks = {"id": 6, "user": "Ann", "text": "Can I talk to a human about this?", "kind": "handoff"}
    scenario = tmp_path / "handoff.yaml"
    data = {**SCENARIO, "turns": [*SCENARIO["turns"], asks]}
    scenario.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    config = EvalConfig(scenario=scenario, profiles=["baseline"], out=tmp_path / "out")
    knowledge, _ = open_knowledge(settings, config)
    try:
        evaluate(settings, config, knowledge)
    finally:
        knowledge.close()

    figures = json.loads((config.out / "summary.json").read_text())["baseline"]
    rows = json.loads((config.out / "turns.json").read_text())
    assert [r["turn"] for r in rows] == ["1", "2", "3", "4", "5"]  # the handoff turn apart
    assert figures["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in rows))
    assert (figures["handoff_turns"], figures["handoffs_opened"]) == (1, 1)
    assert figures["handoff_calls"] == 1  # one summary-model call builds the card
    assert figures["handoff_models"] == ["offline-summary"]
    assert figures["handoff_input_tokens"] > 0 and figures["handoff_output_tokens"] > 0
    assert figures["handoff_cost_usd"] > 0
    report = (config.out / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| baseline | 1 of 1 |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert (
        cells[2] == "1" and cells[3] != "0.0K" and cells[5] == f"${figures['handoff_cost_usd']:.4f}"
    )
