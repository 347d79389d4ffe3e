"""An answer whose follow-up says it failed ("that didn't work") or asks the same again in
other words counts as unresolved on the Insights page, as a 👎 does: out of the
resolution rate and into the gap report, with how the follow-up said so. Real turns over
HTTP with the offline model; thanks, a new question or another person's complaint leave
the answer resolved."""

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from pydantic import SecretStr

from app.settings import ApiKey, Settings
from tests.conftest import make_client

STAFF = {"authorization": "Bearer staff-token-0123456789"}
ACME = {"authorization": "Bearer acme-key-0123456789abcdef"}
QUESTION = "How do I create an invoice?"


def converse(client: TestClient, key: str, *messages: tuple[str, str]) -> list[str]:
    """Each (author, text) as a turn of the conversation `key`; the turns' outcomes."""
    outcomes = []
    for author, text in messages:
        reply = client.post(
            f"/v1/conversations/{key}/messages",
            json={"audience": "client", "author": author, "text": text},
            headers=ACME,
        )
        assert reply.status_code == 200, reply.text
        outcomes.append(reply.json()["outcome"])
    return outcomes


def examples(report: dict[str, Any]) -> dict[tuple[str, int], tuple[str, str | None]]:
    """(conversation key, turn) → (outcome, failed_by) of every example in the report."""
    return {
        (example["conversation_key"], example["turn"]): (example["outcome"], example["failed_by"])
        for group in report["groups"]
        for example in group["examples"]
    }


def test_follow_ups_that_say_an_answer_failed_make_it_unresolved(
    settings: Settings, sample_index: Path
) -> None:
    settings.widget.staff_tokens = {"lead": SecretStr("staff-token-0123456789")}
    settings.api.keys = {
        "acme": ApiKey(key=SecretStr("acme-key-0123456789abcdef"), prefix="api:acme:")
    }
    with make_client(settings, sample_index) as client:
        said_wrong = converse(
            client,
            "api:acme:1",
            ("alice", QUESTION),
            ("alice", "That didn't work, there is no such button."),
        )
        asked_again = converse(
            client,
            "api:acme:2",
            ("alice", QUESTION),
            ("alice", "ok but how do I make a new invoice for a customer??"),
        )
        thanked = converse(
            client, "api:acme:3", ("alice", QUESTION), ("alice", "Thanks, that worked!")
        )
        # In a chat of several people, only the asker's own next message reads the answer.
        someone_else = converse(
            client,
            "api:acme:4",
            ("alice", QUESTION),
            ("bob", "That didn't work for my report either."),
            ("alice", "Great, thank you."),
        )
        assert said_wrong[0] == asked_again[0] == thanked[0] == someone_else[0] == "answered"

        figures = client.get("/v1/insights/outcomes?since=7d", headers=STAFF).json()
        gaps = client.get("/v1/insights/gaps?since=7d", headers=STAFF).json()

    assert figures["outcomes"]["unresolved"] == 2
    assert figures["conversations"] == 4
    assert figures["resolved"] == 2  # the thanked answer and the one bob complained after
    listed = examples(gaps)
    assert listed[("api:acme:1", 1)] == ("unresolved", "said_wrong")
    assert listed[("api:acme:2", 1)] == ("unresolved", "asked_again")
    assert ("api:acme:3", 1) not in listed
    assert ("api:acme:4", 1) not in listed
