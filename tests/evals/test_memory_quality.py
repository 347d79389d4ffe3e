"""The quality columns see memory, and the cost columns see what memory saves: a short
client chat with ~1,000-token search results under `client`, `baseline`, the negative
control `forget-all` and LangChain's own middleware."""

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from langchain_core.messages import HumanMessage, SystemMessage

from app.agent.memory.summarizer import LANGCHAIN_SUMMARY_START
from app.settings import DbSettings, Settings
from evals.harness import EvalConfig, eval_settings
from evals.metrics import (
    Pricing,
    key_terms,
    probe_kept,
    run_summary,
    sent_memory_text,
    turn_rows,
)
from evals.runner import run_profile
from evals.scenario import load_scenario
from tests.fakes import CapturingChatModel, KeywordRetriever
from tests.memory.conftest import passages

TOPICS = [
    "How do I import a bank CSV file with the register?",
    "Where is the budget report for the account?",
    "How do I reconcile the bank account statement?",
    "Can I export the transaction register as CSV?",
    "How do I set up a scheduled transaction for rent?",
    "Where do I change the currency preferences?",
    "How do I add an employee expense voucher?",
    "How do I lock an old period in the register?",
    "How do I attach a file to a transaction?",
    "Where do I set the invoice counter prefix?",
    "How do I record a vendor bill payment?",
    "How do I depreciate an asset account?",
    "How do I split a transaction between two accounts?",
    "Where do I set the fiscal year start for reports?",
    "How do I void a cheque I entered by mistake?",
]
TURNS: list[dict[str, Any]] = [
    {
        "id": 1,
        "user": "Anna",
        "text": "Context: we're a German GmbH on Linux (Ubuntu), everything in EUR. "
        "Please keep answers short. Where do I set the default currency?",
        "kind": "constraint",
    },
    {"id": 2, "user": "Mark", "text": "We need 19% and 7% VAT. Where do I set the tax rate?"},
    {"id": 3, "user": "Mark", "text": "Client paid invoice 412 by bank transfer, how to record?"},
    *({"id": 4 + n, "user": "Lena", "text": text} for n, text in enumerate(TOPICS)),
    {
        "id": 20,
        "user": "Mark",
        "text": "Is there a tax report we can use for our VAT return?",
        "kind": "probe",
        "refers_to": 1,
        "probes": ["German GmbH", "19% and 7% VAT"],
    },
    {
        "id": 21,
        "user": "Anna",
        "text": "the client who paid by transfer wants that invoice again, how do I print it?",
        "kind": "return",
        "refers_to": 3,
        "probes": ["invoice 412"],
    },
]


PROFILES = ["baseline", "client", "forget-all", "langchain-docs", "langchain-tuned"]


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each profile's figures over the short chat (Gemini rules, warm cache)."""
    folder = tmp_path_factory.mktemp("short")
    scenario = folder / "short.yaml"
    data = {"name": "short", "audience": "client", "turns": TURNS}
    scenario.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    config = EvalConfig(scenario=scenario, profiles=PROFILES, out=folder)
    settings = eval_settings(
        Settings(db=DbSettings(url=f"sqlite:///{folder / 'unused.db'}"), _env_file=None), config
    )
    pricing = Pricing(settings.observability)
    figures = {}
    for profile in PROFILES:
        run = asyncio.run(
            run_profile(
                settings,
                load_scenario(scenario),
                profile,
                CapturingChatModel(searches_per_question=(2, 2)),
                KeywordRetriever(passages()),
                provider_rules="gemini",
            )
        )
        rows = turn_rows(run, load_scenario(scenario), pricing)
        figures[profile] = run_summary(rows, run.prefix_changes, run.call_prefix_breaks)
    return figures


def test_memory_shows_in_quality_and_in_cost(found: dict[str, dict[str, Any]]) -> None:
    baseline, client, forgetful = found["baseline"], found["client"], found["forget-all"]
    # The context was worth managing: client cleared and folded, so it sent less.
    assert client["summary_calls"] > 0 and client["input_tokens"] < baseline["input_tokens"]
    assert client["cost_usd"] < baseline["cost_usd"]
    # Forgetting is cheaper still, and the quality columns show what it costs.
    assert forgetful["cost_usd"] < client["cost_usd"]
    assert client["probes"] == forgetful["probes"] == 3
    assert baseline["probes_kept"] == client["probes_kept"] == 1.0
    assert forgetful["probes_kept"] == 0.0
    assert baseline["constraint_kept"] == client["constraint_kept"] == 1.0
    assert forgetful["constraint_kept"] == 0.0
    # The strict bound forgives prefix breaks, the prefix bound does not.
    for figures in found.values():
        assert figures["strict_bound_cost_usd"] <= figures["lower_bound_cost_usd"] + 1e-12
        assert figures["lower_bound_cost_usd"] <= figures["cost_usd"] + 1e-12
    assert baseline["call_prefix_breaks"] == 0 < client["call_prefix_breaks"]
    assert forgetful["call_prefix_breaks"] >= len(TURNS) - 2  # every turn starts anew


def test_langchains_middleware_as_its_docs_show_it_folds_before_every_call(
    found: dict[str, dict[str, Any]],
) -> None:
    docs, tuned, client = found["langchain-docs"], found["langchain-tuned"], found["client"]
    # Past its 4,000-token trigger with 20 messages kept, every model call folds again.
    assert docs["summary_calls"] >= docs["agent_calls"] - 10
    assert docs["call_prefix_breaks"] >= docs["summary_calls"]
    assert docs["cached_share"] < 0.2 < client["cached_share"]
    assert docs["cost_usd"] > 2 * client["cost_usd"]
    # Tuned to batch it folds rarely and keeps what the users stated.
    assert 0 < tuned["summary_calls"] < docs["summary_calls"] / 5
    assert tuned["probes_kept"] == tuned["constraint_kept"] == 1.0


def test_a_probed_fact_survives_a_paraphrase_but_not_a_lost_number() -> None:
    summary = "Mark: VAT rates 19 % and 7 % for invoices; a GmbH in Germany"
    terms = key_terms(summary)
    assert probe_kept("19% and 7% VAT", terms)
    assert probe_kept("VAT rate", terms)  # plural or not
    assert not probe_kept("invoice 412", terms)  # the number is the fact
    assert not probe_kept("German GmbH", terms)  # `Germany` is not `German`: light only


def test_the_probe_check_reads_memory_not_the_question() -> None:
    request = [
        SystemMessage("You help.\n\nSummary: Mark: invoice 412 was paid (#3)"),
        HumanMessage("Anna: which invoice was paid? invoice 999"),
    ]
    sent = key_terms(sent_memory_text(request))
    assert probe_kept("invoice 412", sent)
    assert not probe_kept("invoice 999", sent)  # only in the current message


def test_a_peer_sends_its_summary_where_langchain_does_and_stores_the_fold(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "peer.yaml"
    data = {"name": "peer", "audience": "client", "turns": TURNS[:6]}
    scenario.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    model = CapturingChatModel(searches_per_question=(2, 2))
    settings = Settings(db=DbSettings(url=f"sqlite:///{tmp_path / 'unused.db'}"), _env_file=None)
    asyncio.run(
        run_profile(
            settings,
            load_scenario(scenario),
            "langchain-docs",
            model,
            KeywordRetriever(passages()),
            provider_rules="gemini",
        )
    )
    last = model.calls[-1].messages
    assert isinstance(last[0], SystemMessage)
    assert isinstance(last[1], HumanMessage) and last[1].text.startswith(LANGCHAIN_SUMMARY_START)
    assert "German GmbH" in last[1].text  # the extractive model read LangChain's prompt
    # The folded turns were stored as such: the last turn does not send them again.
    users = [m.text for m in last[2:] if isinstance(m, HumanMessage)]
    assert users and not any("German GmbH" in text for text in users)
