"""`/v1/conversations/{key}/memory`: staff see what is remembered of each person who wrote
in a conversation and forget an item; no client, and no other staff member's widget chat."""

from typing import Any

from fastapi.testclient import TestClient

from app.agent.memory.profiles import SummaryPolicy
from app.chat.types import TurnRequest
from app.memory.scope import telegram_scope
from app.memory.store import FORGOTTEN
from app.runtime import Runtime
from app.settings import Settings
from tests.people_memory.test_api import ALICE, BOB, OTHER, SHOP, api, say

__all__ = ["api"]  # the fixture this module uses from test_api.py


def fold_every_third_turn(settings: Settings) -> None:
    """From the third turn on, all but the last exchange fold: earlier messages leave the
    context, and the facts stated in them are kept."""
    settings.profiles.definitions["client"].summary = SummaryPolicy(
        trigger_exchanges=2, keep_exchanges=1
    )


def memory(client: TestClient, key: str, headers: dict[str, str] = ALICE) -> dict[str, Any]:
    response = client.get(f"/v1/conversations/{key}/memory", headers=headers)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def forget(
    client: TestClient, key: str, item: int, headers: dict[str, str] = ALICE
) -> tuple[int, Any]:
    """The status and body of a staff DELETE of one item."""
    response = client.delete(f"/v1/conversations/{key}/memory/{item}", headers=headers)
    return response.status_code, response.json()


def said(client: TestClient, key: str) -> dict[int, str]:
    """The transcript's messages by recall id."""
    messages = client.get(f"/v1/conversations/{key}", headers=ALICE).json()["messages"]
    return {m["id"]: m["content"] for m in messages}


def test_staff_see_each_person_of_an_api_conversation_with_their_sources(api: TestClient) -> None:
    say(api, "api:shop:0", "Remember that I prefer short answers", SHOP, person="u-1")
    say(api, "api:shop:1", "Remember that our currency is CHF", SHOP, person="u-1")
    say(api, "api:shop:1", "Remember that we use GnuCash 5", SHOP, person="u-2", author="Bob")
    say(api, "api:shop:1", "How do I create an invoice?", SHOP)  # nobody remembered
    say(api, "api:other:1", "Remember that we use Windows", OTHER, person="u-1")

    found = memory(api, "api:shop:1")
    assert found["conversation_key"] == "api:shop:1"
    shown = [
        (p["scope"], p["who"], [(i["text"], i["source_conversation"]) for i in p["items"]])
        for p in found["people"]
    ]
    assert shown == [
        (
            "api|api:shop:|u-1",
            "Ann",
            [("I prefer short answers", "api:shop:0"), ("our currency is CHF", "api:shop:1")],
        ),
        ("api|api:shop:|u-2", "Bob", [("we use GnuCash 5", "api:shop:1")]),
    ]
    # Each item's recall id is the transcript message it was said in.
    first, currency = found["people"][0]["items"]
    assert said(api, "api:shop:0")[first["recall_id"]] == "Remember that I prefer short answers"
    assert said(api, "api:shop:1")[currency["recall_id"]] == "Remember that our currency is CHF"
    assert currency["kind"] == "currency"
    assert {"created_at", "last_used_at"} <= set(currency)


def test_no_client_reaches_it(api: TestClient) -> None:
    say(api, "api:shop:1", "Remember that our currency is CHF", SHOP, person="u-1")
    item = memory(api, "api:shop:1")["people"][0]["items"][0]["id"]
    for headers, refused in [(SHOP, 403), (OTHER, 403), ({}, 401)]:
        seen = api.get("/v1/conversations/api:shop:1/memory", headers=headers)
        assert seen.status_code == refused
        assert forget(api, "api:shop:1", item, headers)[0] == refused
    assert api.get("/v1/conversations/api:shop:9/memory", headers=ALICE).status_code == 404
    assert [i["id"] for i in memory(api, "api:shop:1")["people"][0]["items"]] == [item]


def test_a_staff_member_sees_their_own_widget_memory_only(api: TestClient) -> None:
    say(api, "widget:alice:1", "Remember that I prefer short answers", ALICE)
    people = memory(api, "widget:alice:1")["people"]
    assert [(p["who"], [i["text"] for i in p["items"]]) for p in people] == [
        ("alice", ["I prefer short answers"])
    ]
    item = people[0]["items"][0]["id"]
    assert api.get("/v1/conversations/widget:alice:1/memory", headers=BOB).status_code == 403
    assert forget(api, "widget:alice:1", item, BOB)[0] == 403


def test_deleting_an_item_forgets_it_and_blanks_its_words_in_the_archive(
    api: TestClient, settings: Settings
) -> None:
    fold_every_third_turn(settings)
    say(api, "api:other:1", "Remember that we use Windows", OTHER, person="u-1")
    for text in [
        "Our invoice printer is a Brother HL-2350 in room 4.",
        "How do I create an invoice?",
        "How do I record a payment?",
    ]:
        say(api, "api:shop:1", text, SHOP, person="u-1")
    (printer,) = memory(api, "api:shop:1")["people"][0]["items"]
    assert printer["text"] == "Our invoice printer is a Brother HL-2350 in room 4."
    theirs = memory(api, "api:other:1")["people"][0]["items"][0]["id"]

    # Not an item of this conversation's people: another tenant's person of the same id.
    assert forget(api, "api:shop:1", theirs)[0] == 404
    assert forget(api, "api:shop:1", printer["id"]) == (200, {"forgotten": 1})
    assert memory(api, "api:shop:1")["people"][0]["items"] == []
    assert api.get("/v1/people/u-1/memory", headers=SHOP).status_code == 404
    assert said(api, "api:shop:1")[printer["recall_id"]] == FORGOTTEN
    assert [i["text"] for i in memory(api, "api:other:1")["people"][0]["items"]] == [
        "we use Windows"
    ]
    assert forget(api, "api:shop:1", printer["id"])[0] == 404


def test_a_telegram_chat_shows_each_sender_with_their_own_facts_and_the_shared_memory(
    api: TestClient, settings: Settings
) -> None:
    fold_every_third_turn(settings)
    runtime: Runtime = api.app.state.runtime  # type: ignore[attr-defined]
    for user, author, text in [
        (2, "Bob", "Our company is a GmbH in Munich."),
        (1, "Ann", "How do I create an invoice?"),
        (1, "Ann K.", "How do I record a payment?"),  # folds the first two: Bob's fact is his
        (1, "Ann K.", "Remember that our currency is CHF"),
    ]:
        request = TurnRequest(
            "telegram", "telegram:-100", "client", author, text,
            memory_scope=telegram_scope(-100, user),
        )  # fmt: skip
        api.portal.call(runtime.chat.handle_turn, request)  # type: ignore[union-attr]
    people = memory(api, "telegram:-100")["people"]
    assert [(p["scope"], p["who"], [i["text"] for i in p["items"]]) for p in people] == [
        ("telegram|-100|2", "Bob", ["Our company is a GmbH in Munich."]),
        ("telegram|-100|1", "Ann K.", ["our currency is CHF"]),
        ("telegram|-100|*", "everyone in the chat", []),
    ]
    bobs = people[0]["items"][0]
    assert forget(api, "telegram:-100", bobs["id"]) == (200, {"forgotten": 1})
    assert memory(api, "telegram:-100")["people"][0]["items"] == []


def test_people_whose_audience_is_not_remembered_are_not_listed(
    api: TestClient, settings: Settings
) -> None:
    settings.memory.audiences = ["staff"]
    say(api, "api:shop:1", "Remember that our currency is CHF", SHOP, person="u-1")
    assert memory(api, "api:shop:1")["people"] == []
