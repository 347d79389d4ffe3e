"""The returning-customer scenario (evals/scenarios/returning_customer.yaml) on the repo's
GnuCash fixture pages: a customer's constraints, stated a week before, reach the model of
her second conversation with people memory on, and not with it off or under `forget-all`;
another tenant's person of the same id never sees them, nor she theirs."""

import json
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from app.agent.messages import message_text
from app.memory.store import BLOCK_HEADING
from app.settings import DbSettings, Settings
from evals.harness import EvalConfig, evaluate, open_knowledge
from evals.scenario import load_scenario
from tests.conftest import FIXTURES, ROOT
from tests.fakes import CapturingChatModel
from tests.people_memory.test_block import block_of

SCENARIO = ROOT / "evals" / "scenarios" / "returning_customer.yaml"
PROFILES = ["client", "client-memory-off", "forget-all"]
# What Anna of Acme stated in her first conversation, as her memory keeps it: four facts
# in passing (through the fold), two with "remember that", one in passing after the fold
# (through the write when the conversation went idle).
ACME_STATED = [
    "I prefer short answers in bullet points",
    "every month our Raiffeisen statement import brings in the same transactions twice",
    "We are a small engineering GmbH in Winterthur.",
    "We are still on GnuCash 4.8.",
    "The office PCs run Ubuntu 22.04.",
    "Everything we invoice is in Swiss francs (CHF).",
    "Most of our customers are in Austria.",
]
GLOBEX_STATED = ["our currency is the Polish złoty, PLN", "we run GnuCash 3.8 on macOS Monterey"]


@dataclass
class Played:
    summary: dict[str, dict[str, Any]]
    rows: list[dict[str, Any]]
    report: str
    # per profile, per conversation: the requests the model received, in order
    requests: dict[str, dict[str, list[list[BaseMessage]]]]


def by_conversation(
    calls: list[list[BaseMessage]], openings: list[tuple[str, str]]
) -> dict[str, list[list[BaseMessage]]]:
    """The requests of each chat, played in order: a chat's first request ends with its
    opening message."""
    split: dict[str, list[list[BaseMessage]]] = {}
    pending, chat = list(openings), ""
    for request in calls:
        last = request[-1]
        if pending and isinstance(last, HumanMessage) and last.text.endswith(pending[0][1]):
            chat = pending.pop(0)[0]
        split.setdefault(chat, []).append(request)
    assert not pending
    return split


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Played:
    folder = tmp_path_factory.mktemp("returning")
    config = EvalConfig(
        scenario=SCENARIO,
        profiles=PROFILES,
        out=folder / "out",
        kb=FIXTURES / "gnucash",
        cache_dir=folder,
    )
    settings = Settings(db=DbSettings(url=f"sqlite:///{folder / 'unused.db'}"), _env_file=None)
    models: list[CapturingChatModel] = []

    def capturing(repeat: int) -> CapturingChatModel:
        models.append(CapturingChatModel(searches_per_question=(1, 3), seed=repeat))
        return models[-1]

    knowledge, _ = open_knowledge(settings, config)
    try:
        evaluate(settings, config, knowledge, model_for_repeat=capturing)
    finally:
        knowledge.close()
    openings = [(chat.id, chat.turns[0].text) for chat in load_scenario(SCENARIO).chats]
    requests = {
        profile: by_conversation([call.messages for call in model.calls], openings)
        for profile, model in zip(PROFILES, models, strict=True)
    }
    out = config.out
    return Played(
        json.loads((out / "summary.json").read_text()),
        json.loads((out / "turns.json").read_text()),
        (out / "report.md").read_text(),
        requests,
    )


def memory_block(request: list[BaseMessage]) -> str | None:
    system = request[0]
    assert isinstance(system, SystemMessage)
    blocks = [b["text"] for b in system.content[1:]] if isinstance(system.content, list) else []  # type: ignore[index]
    return next((b for b in blocks if b.startswith(BLOCK_HEADING)), None)


def test_memory_on_keeps_every_stated_constraint_and_off_loses_them(played: Played) -> None:
    on, off, forgetful = (played.summary[p] for p in PROFILES)
    assert on["returning_probes"] == off["returning_probes"] == forgetful["returning_probes"] == 12
    assert on["returning_probes_kept"] == 1.0
    assert off["returning_probes_kept"] == forgetful["returning_probes_kept"] == 0.0
    # The block costs tokens, not the cache: the cached share stays within 2 points.
    assert on["returning_input_tokens_per_turn"] > off["returning_input_tokens_per_turn"]
    assert on["returning_cached_share"] >= off["returning_cached_share"] - 0.02
    assert "## Returning people" in played.report
    assert "| client | on | 100% of 12 | 0 of 25 |" in played.report


def test_the_second_conversation_starts_with_what_she_stated_and_nothing_else(
    played: Played,
) -> None:
    second = played.requests["client"]["acme-second"]
    # Every request of the conversation carries the same block, made of her own words.
    assert {memory_block(request) for request in second} == {block_of(*ACME_STATED)}
    for profile in ("client-memory-off", "forget-all"):
        assert all(memory_block(r) is None for r in played.requests[profile]["acme-second"])


def test_another_tenants_person_of_the_same_id_never_sees_them_nor_they_hers(
    played: Played,
) -> None:
    requests = played.requests["client"]
    assert {memory_block(r) for r in requests["globex-second"]} == {block_of(*GLOBEX_STATED)}
    for chat, foreign in (("acme-second", GLOBEX_STATED), ("globex-second", ACME_STATED)):
        sent = "\n".join(message_text(m) for r in requests[chat] for m in r)
        assert not [fact for fact in foreign if fact in sent], chat
    assert all(row["absent_seen"] == [] for row in played.rows)
    assert played.summary["client"]["absent"] == 25
