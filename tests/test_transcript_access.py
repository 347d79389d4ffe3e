"""What each caller reads of a transcript (`GET /v1/conversations/{key}`): staff all of it,
an API key and an anonymous caller only what was said (the client's messages, the answers
with their citations, the support team's replies), never the model's tool calls, their
results or the memory block the model read."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from app.settings import ApiKey, Settings
from tests.conftest import make_client

SHOP = {"authorization": "Bearer shop-key-0123456789abcdef"}
ALICE = {"authorization": "Bearer alice-token-0123456789"}
KEY = "api:shop:1"
INVOICE = "How do I create an invoice?"


@pytest.fixture
def keyed(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    settings.api.keys = {"shop": ApiKey(key=SecretStr(SHOP["authorization"][7:]), prefix="api:")}
    settings.widget.staff_tokens = {"alice": SecretStr(ALICE["authorization"][7:])}
    with make_client(settings, sample_index) as client:
        yield client


def say(client: TestClient, key: str, text: str, **extra: str) -> dict[str, Any]:
    body = {"audience": "client", "author": "Ann", "text": text, **extra}
    response = client.post(f"/v1/conversations/{key}/messages", json=body, headers=SHOP)
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()
    return reply


def messages(client: TestClient, key: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    response = client.get(f"/v1/conversations/{key}", headers=headers)
    assert response.status_code == 200, response.text
    shown: list[dict[str, Any]] = response.json()["messages"]
    return shown


def a_conversation_with_everything(client: TestClient) -> None:
    """An answer the search tool found, its turn sent the model the memory block (of a
    fact told in another conversation), a request for a person and the support team's
    reply."""
    say(client, "api:shop:0", "Remember that our currency is CHF", person="u-1")
    say(client, KEY, INVOICE, person="u-1")
    say(client, KEY, "Can I talk to a human?", person="u-1")
    (handoff,) = client.get("/v1/handoffs", headers=ALICE).json()
    client.post(f"/v1/handoffs/{handoff['id']}/claim", headers=ALICE).raise_for_status()
    replied = client.post(
        f"/v1/handoffs/{handoff['id']}/messages", json={"text": "Looking now"}, headers=ALICE
    )
    assert replied.status_code == 201, replied.text


def test_staff_read_the_whole_transcript(keyed: TestClient) -> None:
    a_conversation_with_everything(keyed)
    shown = messages(keyed, KEY, ALICE)
    roles = [m["role"] for m in shown]
    assert "tool" in roles and roles[-1] == "staff"
    assert any(m["tool_calls"] for m in shown if m["role"] == "assistant")
    asked = next(m for m in shown if m["content"] == INVOICE)
    assert asked["memory_block"] and "our currency is CHF" in asked["memory_block"]


def test_an_api_key_reads_what_was_said_only(keyed: TestClient) -> None:
    a_conversation_with_everything(keyed)
    everything = messages(keyed, KEY, ALICE)
    shown = messages(keyed, KEY, SHOP)
    # what a client reads is staff's transcript less the model's work
    said = [m for m in everything if m["role"] != "tool" and not m["tool_calls"]]
    assert [(m["id"], m["role"], m["content"]) for m in shown] == [
        (m["id"], m["role"], m["content"]) for m in said
    ]
    assert {m["role"] for m in shown} == {"user", "assistant", "staff"}
    assert {m["memory_block"] for m in shown} == {None}
    assert {m["tool_name"] for m in shown} == {None} and not any(m["tool_calls"] for m in shown)
    answer = shown[shown.index(next(m for m in shown if m["content"] == INVOICE)) + 1]
    assert answer["role"] == "assistant" and answer["citations"]  # cited, as for staff
    assert shown[-1] == {**shown[-1], "role": "staff", "content": "Looking now"}


def test_an_anonymous_caller_reads_what_was_said_only(client: TestClient) -> None:
    asked = {"audience": "client", "author": "Ann", "text": INVOICE}
    assert client.post("/v1/conversations/demo/messages", json=asked).status_code == 200
    shown = client.get("/v1/conversations/demo").json()["messages"]
    assert [(m["role"], m["tool_calls"], m["memory_block"]) for m in shown] == [
        ("user", None, None),
        ("assistant", None, None),
    ]
    assert "Sales → Invoices → New invoice" in shown[1]["content"]
    assert shown[1]["citations"][0]["source"] == "en/create-invoice.md"
