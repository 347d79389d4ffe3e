"""A long scripted conversation and a knowledge base of ~1,000-token search results."""

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from knowledge.types import Passage
from tests.conftest import ROOT

SESSION = ROOT / "evals" / "scenarios" / "client_session_dev.yaml"
CONSTRAINT = "we run GnuCash 4 on Linux (Ubuntu)"
SHORT_ANSWERS = "Please keep answers short"

_TOPICS = [
    "invoice",
    "customer",
    "vendor",
    "bill",
    "payment",
    "account",
    "report",
    "tax",
    "VAT",
    "rate",
    "currency",
    "import",
    "CSV",
    "bank",
    "reconcile",
    "budget",
    "depreciation",
    "asset",
    "register",
    "transaction",
    "export",
    "language",
    "preferences",
    "counter",
    "prefix",
    "scheduled",
    "period",
    "lock",
    "attach",
    "employee",
    "expense",
]


def passages(count: int = 60, sentences: int = 12) -> list[Passage]:
    """Help-center-like passages of ~250 tokens: a search returns ~1,000 tokens."""
    rng = random.Random(7)
    found = []
    for number in range(count):
        words = rng.sample(_TOPICS, 5)
        text = " ".join(
            f"To change the {rng.choice(words)} settings open the {rng.choice(words)} menu, "
            f"choose {rng.choice(words)} and confirm; GnuCash updates the {rng.choice(words)}."
            for _ in range(sentences)
        )
        found.append(Passage(text, f"Help page {number}", f"Page {number}", f"p{number}.html"))
    return found


def session_turns(path: Path = SESSION) -> list[dict[str, Any]]:
    """The turns the bot answers: the closing `handoff` turn asks for a person (evals)."""
    turns: list[dict[str, Any]] = yaml.safe_load(path.read_text())["turns"]
    return [turn for turn in turns if turn.get("kind") != "handoff"]


@pytest.fixture(scope="session")
def kb_passages() -> list[Passage]:
    return passages()
