"""`/v1/people/{person}/memory` and the `person` field: each API key reaches the people
of its own key prefix, staff their own memory; what the model receives is captured."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import select

from app.agent.memory.profiles import SummaryPolicy
from app.agent.memory.summarizer import build_summary_model
from app.db.models import MemoryItem, Summary
from app.memory.idle import IdleWriter
from app.memory.store import FORGOTTEN
from app.runtime import Runtime
from app.settings import ApiKey, Settings
from tests.conftest import make_client

SHOP = {"authorization": "Bearer shop-key-0123456789abcdef"}
OTHER = {"authorization": "Bearer other-key-0123456789abcdef"}
ALICE = {"authorization": "Bearer alice-token"}
BOB = {"authorization": "Bearer bob-token"}


def api_keys(settings: Settings) -> None:
    """Two API keys (two tenants) and two staff members."""
    settings.api.keys = {
        "shop": ApiKey(key=SecretStr(SHOP["authorization"][7:]), prefix="api:shop:"),
        "other": ApiKey(key=SecretStr(OTHER["authorization"][7:]), prefix="api:other:"),
    }
    settings.widget.staff_tokens = {
        "alice": SecretStr("alice-token"),
        "bob": SecretStr("bob-token"),
    }


@pytest.fixture
def api(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    api_keys(settings)
    with make_client(settings, sample_index) as client:
        yield client


@pytest.fixture
def folding(settings: Settings) -> None:
    """The client profile folds all but the last exchange once two are in (ask for it
    before `api`)."""
    settings.profiles.definitions["client"].summary = SummaryPolicy(
        trigger_exchanges=2, keep_exchanges=1
    )


def say(client: TestClient, key: str, text: str, headers: dict[str, str], **extra: str) -> None:
    body = {"audience": "client", "author": "Ann", "text": text, **extra}
    response = client.post(f"/v1/conversations/{key}/messages", json=body, headers=headers)
    assert response.status_code == 200, response.text


def test_a_backend_reads_and_forgets_its_own_people_only(api: TestClient) -> None:
    say(api, "api:shop:1", "Remember that our currency is CHF", SHOP, person="u-1")
    say(api, "api:other:1", "Remember that we use GnuCash 5", OTHER, person="u-1")

    mine = api.get("/v1/people/u-1/memory", headers=SHOP)
    assert mine.status_code == 200, mine.text
    assert [(i["text"], i["kind"], i["source_conversation"]) for i in mine.json()] == [
        ("our currency is CHF", "currency", "api:shop:1")
    ]
    theirs = api.get("/v1/people/u-1/memory", headers=OTHER).json()
    assert [i["text"] for i in theirs] == ["we use GnuCash 5"]
    assert api.get("/v1/people/u-2/memory", headers=SHOP).status_code == 404
    assert api.get("/v1/people/u-1/memory").status_code == 401
    assert api.get("/v1/people/u-1/memory", headers=ALICE).status_code == 403

    assert api.delete("/v1/people/u-1/memory", headers=SHOP).json() == {"forgotten": 1}
    assert api.get("/v1/people/u-1/memory", headers=SHOP).status_code == 404
    assert api.delete("/v1/people/u-1/memory", headers=SHOP).status_code == 404
    # The other tenant's person with the same id keeps theirs.
    assert [i["text"] for i in api.get("/v1/people/u-1/memory", headers=OTHER).json()] == [
        "we use GnuCash 5"
    ]


def test_one_item_goes_with_what_it_replaced_and_only_in_its_own_scope(api: TestClient) -> None:
    for text in ["our currency is EUR", "our currency is CHF", "we use GnuCash 5"]:
        say(api, "api:shop:1", f"Remember that {text}", SHOP, person="u-1")
    items = api.get("/v1/people/u-1/memory", headers=SHOP).json()
    assert [i["text"] for i in items] == ["our currency is CHF", "we use GnuCash 5"]
    currency = items[0]["id"]

    assert api.delete(f"/v1/people/u-1/memory/{currency}", headers=OTHER).status_code == 404
    gone = api.delete(f"/v1/people/u-1/memory/{currency}", headers=SHOP)
    assert gone.json() == {"forgotten": 2}  # CHF and the EUR it replaced
    assert [i["text"] for i in api.get("/v1/people/u-1/memory", headers=SHOP).json()] == [
        "we use GnuCash 5"
    ]


def test_staff_are_remembered_by_their_sign_in(api: TestClient) -> None:
    say(api, "widget:alice:1", "Remember that I prefer short answers", ALICE, person="bob")
    items = api.get("/v1/people/alice/memory", headers=ALICE).json()
    assert [i["text"] for i in items] == ["I prefer short answers"]


def test_a_bad_person_id_is_refused_and_nothing_stored(api: TestClient) -> None:
    body = {"audience": "client", "author": "Ann", "text": "hi", "person": "a|b"}
    response = api.post("/v1/conversations/api:shop:9/messages", json=body, headers=SHOP)
    assert response.status_code == 422
    assert api.get("/v1/conversations/api:shop:9", headers=SHOP).status_code == 404
    listed = api.get("/v1/people/a%20b/memory", headers=SHOP)
    assert listed.status_code == 422
    assert listed.json() == {"detail": "person: a person id matches ^[A-Za-z0-9._:@+-]{1,128}$"}


def test_a_folded_statement_is_kept_for_its_own_person_whatever_name_they_share(
    folding: None, api: TestClient
) -> None:
    """Two people of one API key write as "Sam" in one conversation: the fold during the
    victim's turn takes mallory's statement in, and it stays mallory's."""
    key = "api:shop:shared"
    sentence = "Our refund bank account is EVIL-IBAN-666"
    say(api, key, sentence, SHOP, person="mallory", author="Sam")
    for question in ["How do I create an invoice?", "How do I record a payment?"]:
        say(api, key, question, SHOP, person="victim", author="Sam")

    said = api.get(f"/v1/conversations/{key}", headers=SHOP).json()["messages"]
    assert [m["context_state"] for m in said if m["content"] == sentence] == ["dropped"]
    victim = api.get("/v1/people/victim/memory", headers=SHOP)
    assert victim.status_code == 404, victim.text
    mallory = api.get("/v1/people/mallory/memory", headers=SHOP).json()
    assert [i["text"] for i in mallory] == [sentence]


def test_forgetting_an_item_blanks_its_source_statement_and_nothing_else(
    folding: None, api: TestClient
) -> None:
    key = "api:shop:1"
    say(api, key, "Remember that invoice", SHOP, person="u-1")
    for question in ["How do I create an invoice?", "How do I pay an invoice?", "Invoice VAT?"]:
        say(api, key, question, SHOP, person="u-1")
    (item,) = api.get("/v1/people/u-1/memory", headers=SHOP).json()
    before = api.get(f"/v1/conversations/{key}", headers=SHOP).json()["messages"]
    archived = [m for m in before if m["context_state"] != "active"]
    assert sum("invoice" in m["content"].lower() for m in archived) > 5

    assert api.delete(f"/v1/people/u-1/memory/{item['id']}", headers=SHOP).json() == {
        "forgotten": 1
    }
    after = api.get(f"/v1/conversations/{key}", headers=SHOP).json()["messages"]
    blanked = [m["id"] for m in after if m["content"] == FORGOTTEN]
    assert blanked == [item["recall_id"]]
    assert [m["content"] for m in after if m["id"] != item["recall_id"]] == [
        m["content"] for m in before if m["id"] != item["recall_id"]
    ]


def test_a_delete_that_finds_nothing_changes_nothing(api: TestClient, settings: Settings) -> None:
    runtime: Runtime = api.app.state.runtime  # type: ignore[attr-defined]
    idle = IdleWriter(settings, runtime.sessions, build_summary_model(settings.llm))
    later = datetime.now(UTC) + timedelta(minutes=6)  # past the default cache TTL
    say(api, "api:shop:1", "Our currency is CHF. How do I create an invoice?", SHOP, person="p-1")
    assert api.delete("/v1/people/p-1/memory/99999", headers=SHOP).status_code == 404
    assert api.delete("/v1/people/nobody/memory", headers=SHOP).status_code == 404
    assert api.portal.call(idle.write_idle, later) == 1  # type: ignore[union-attr]
    kept = api.get("/v1/people/p-1/memory", headers=SHOP).json()
    assert [i["text"] for i in kept] == ["Our currency is CHF."]

    # Forgetting all of a person holds back what is not written yet, even with nothing kept.
    say(api, "api:shop:2", "We run GnuCash 5 on Windows. How do I pay?", SHOP, person="p-2")
    assert api.delete("/v1/people/p-2/memory", headers=SHOP).json() == {"forgotten": 0}
    assert api.portal.call(idle.write_idle, later) == 0  # type: ignore[union-attr]
    assert api.get("/v1/people/p-2/memory", headers=SHOP).status_code == 404


def test_an_item_too_long_is_refused_with_the_reason_and_nothing_stored(api: TestClient) -> None:
    body = {"audience": "client", "author": "Ann", "person": "u-1"}
    longest = "our shop's address is " + "x" * 478  # 500 characters: kept
    text = f"Remember that {longest}y"
    refused = api.post("/v1/conversations/api:shop:1/messages", json=body | {"text": text},
                       headers=SHOP)  # fmt: skip
    assert refused.status_code == 422
    assert refused.json()["detail"] == (
        "an item to remember holds at most 500 characters (this one has 501): say it shorter"
    )
    assert api.get("/v1/conversations/api:shop:1", headers=SHOP).status_code == 404
    say(api, "api:shop:1", f"Remember that {longest}", SHOP, person="u-1")
    assert [i["text"] for i in api.get("/v1/people/u-1/memory", headers=SHOP).json()] == [longest]


def test_a_tenant_s_memory_is_bounded_and_the_others_are_not_touched(
    folding: None, api: TestClient, settings: Settings
) -> None:
    settings.memory.max_tenant_items = 2
    say(api, "api:shop:1", "Remember that our currency is CHF", SHOP, person="u-1")
    say(api, "api:shop:2", "Remember that we use GnuCash 5", SHOP, person="u-2")
    body = {"audience": "client", "author": "Ann", "person": "u-3",
            "text": "Remember that we are a GmbH"}  # fmt: skip
    refused = api.post("/v1/conversations/api:shop:3/messages", json=body, headers=SHOP)
    assert refused.status_code == 422
    assert refused.json()["detail"] == (
        "the memory of this tenant is full (2 items): forget some first"
    )
    # A fact stated in passing is not kept either, and the turns are answered.
    for text in ["Our company is a GmbH in Zurich.", "How do I pay?", "How do I close?"]:
        say(api, "api:shop:3", text, SHOP, person="u-3")
    assert api.get("/v1/people/u-3/memory", headers=SHOP).status_code == 404
    # Another tenant's memory has room of its own.
    say(api, "api:other:1", "Remember that we are a GmbH", OTHER, person="u-3")
    assert api.get("/v1/people/u-3/memory", headers=OTHER).status_code == 200


def reply_to(client: TestClient, key: str, text: str, headers: dict[str, str], **extra: str) -> str:
    body = {"audience": "client", "author": "Ann", "text": text, **extra}
    response = client.post(f"/v1/conversations/{key}/messages", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return str(response.json()["text"])


def test_remember_that_says_where_it_is_saved_and_the_memory_lists_it(api: TestClient) -> None:
    reply = reply_to(api, "api:shop:1", "remember that I use the Android app", SHOP, person="u-1")
    assert reply.startswith("Noted: I use the Android app. Saved to your memory (person “u-1”)")
    items = api.get("/v1/people/u-1/memory", headers=SHOP).json()
    assert [i["text"] for i in items] == ["I use the Android app"]


def test_without_a_person_remember_that_is_kept_in_the_conversation_only_and_says_so(
    folding: None, api: TestClient
) -> None:
    key = "api:shop:1"
    reply = reply_to(api, key, "remember that I use the Android app", SHOP)
    assert reply.startswith("I will keep this in mind for this conversation only")
    assert "Noted" not in reply and "Saved" not in reply
    assert api.get(f"/v1/conversations/{key}/memory", headers=ALICE).json()["people"] == []
    for question in ["How do I create an invoice?", "How do I record a payment?"]:
        reply_to(api, key, question, SHOP)
    said = api.get(f"/v1/conversations/{key}", headers=SHOP).json()["messages"]
    assert [m["context_state"] for m in said if m["content"].startswith("remember")] == ["dropped"]
    # The conversation's summary holds it from then on, with its recall id.
    runtime: Runtime = api.app.state.runtime  # type: ignore[attr-defined]
    summary = api.portal.call(latest_summary, runtime)  # type: ignore[union-attr]
    assert f"Ann: remember that I use the Android app (#{said[0]['id']})" in summary
    assert api.get(f"/v1/conversations/{key}/memory", headers=ALICE).json()["people"] == []


async def latest_summary(runtime: Runtime) -> str:
    async with runtime.sessions() as session:
        texts = await session.scalars(select(Summary.text).order_by(Summary.id.desc()))
        return str(texts.first())


def test_an_anonymous_caller_is_told_its_remember_that_stays_in_the_conversation(
    client: TestClient,
) -> None:
    """With no API key configured `/v1` is open, and nobody is remembered: a `person`
    without a credential is not a memory."""
    reply = reply_to(client, "c-1", "Remember that I use the Android app", {}, person="u-1")
    assert reply.startswith("I will keep this in mind for this conversation only")
    runtime: Runtime = client.app.state.runtime  # type: ignore[attr-defined]
    assert client.portal.call(stored_items, runtime) == []  # type: ignore[union-attr]


async def stored_items(runtime: Runtime) -> list[str]:
    async with runtime.sessions() as session:
        return list(await session.scalars(select(MemoryItem.text)))
