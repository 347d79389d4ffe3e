"""/v1/handoffs over HTTP: who may use it, and the errors it answers (ErrorOut)."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from app.settings import ApiKey, Settings
from tests.conftest import make_client

ALICE = {"authorization": "Bearer alice-api-token"}
BOB = {"authorization": "Bearer bob-api-token"}
CLIENT = {"authorization": "Bearer acme-client-key-0123456789"}


@pytest.fixture
def api(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    settings.widget.staff_tokens = {
        "alice": SecretStr("alice-api-token"),
        "bob": SecretStr("bob-api-token"),
    }
    settings.api.keys = {"acme": ApiKey(key=SecretStr("acme-client-key-0123456789"))}
    with make_client(settings, sample_index) as client:
        yield client


def open_handoff(api: TestClient) -> int:
    turn = {"audience": "client", "author": "Ann", "text": "Позовите оператора, пожалуйста"}
    reply = api.post("/v1/conversations/api:shop:1/messages", json=turn, headers=CLIENT)
    assert "сотруднику поддержки" in reply.json()["text"]
    (handoff,) = api.get("/v1/handoffs", headers=ALICE).json()
    return int(handoff["id"])


def test_the_handoff_api_is_for_staff_only(api: TestClient) -> None:
    handoff = open_handoff(api)
    assert api.get("/v1/handoffs").status_code == 401  # no credentials at all
    for method, path in [
        ("get", "/v1/handoffs"),
        ("get", f"/v1/handoffs/{handoff}"),
        ("post", f"/v1/handoffs/{handoff}/claim"),
        ("post", f"/v1/handoffs/{handoff}/resolve"),
    ]:
        refused = getattr(api, method)(path, headers=CLIENT)
        assert refused.status_code == 403, path
    reply = api.post(f"/v1/handoffs/{handoff}/messages", json={"text": "hi"}, headers=CLIENT)
    assert reply.status_code == 403
    assert api.get(f"/v1/handoffs/{handoff}", headers=ALICE).json()["status"] == "open"


def test_claims_replies_and_resolves_answer_what_went_wrong(api: TestClient) -> None:
    handoff = open_handoff(api)
    path = f"/v1/handoffs/{handoff}"
    early = api.post(f"{path}/messages", json={"text": "hi"}, headers=ALICE)
    assert early.status_code == 409 and "claim it before replying" in early.json()["detail"]
    assert api.post(f"{path}/claim", headers=ALICE).json()["claimed_by"] == "alice"
    assert api.post(f"{path}/claim", headers=ALICE).status_code == 200  # one's own again
    lost = api.post(f"{path}/claim", headers=BOB)
    assert lost.status_code == 409
    assert lost.json() == {"detail": f"handoff {handoff} is claimed by alice: it cannot be claimed"}
    assert api.post(f"{path}/resolve", headers=BOB).status_code == 409
    empty = api.post(f"{path}/messages", json={"text": "  "}, headers=ALICE)
    assert empty.status_code == 422
    assert api.post("/v1/handoffs/999/claim", headers=ALICE).json() == {"detail": "no handoff 999"}
    assert api.get("/v1/handoffs?status=claimed", headers=ALICE).json()[0]["id"] == handoff
    assert api.post(f"{path}/resolve", headers=ALICE).json()["resolved_by"] == "alice"
    assert api.post(f"{path}/resolve", headers=ALICE).status_code == 409
    assert api.get("/v1/handoffs", headers=ALICE).json() == []


def sse_events(body: str) -> list[tuple[str, dict[str, object]]]:
    events = []
    for block in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def test_every_reply_says_what_the_turn_came_to_and_who_has_the_conversation(
    api: TestClient,
) -> None:
    """HTTP JSON and the stream's `done` event alike: the outcome, and the handoff's state
    while a person has the conversation; an API caller is never told of Telegram's /ask."""
    path = "/v1/conversations/api:shop:2/messages"

    def turn(text: str, *, stream: bool = False) -> dict[str, object]:
        body = {"audience": "client", "author": "Ann", "text": text}
        if not stream:
            reply = api.post(path, json=body, headers=CLIENT)
            assert reply.status_code == 200, reply.text
            return dict(reply.json())
        streamed = api.post(f"{path}/stream", json=body, headers=CLIENT)
        (done,) = [data for event, data in sse_events(streamed.text) if event == "done"]
        return done

    answered = turn("How do I create an invoice?")
    assert (answered["outcome"], answered["handoff"]) == ("answered", None)

    handed = turn("Can I talk to a human?", stream=True)
    assert (handed["outcome"], handed["handoff"]) == ("handed_off", "open")
    assert "support team" in str(handed["text"]) and "/ask" not in str(handed["text"])

    quiet = turn("Hello? Anyone there?", stream=True)
    assert (quiet["outcome"], quiet["handoff"], quiet["text"]) == ("quiet", "open", "")
    (handoff,) = api.get("/v1/handoffs", headers=ALICE).json()
    api.post(f"/v1/handoffs/{handoff['id']}/claim", headers=ALICE)
    claimed = turn("Still there?")
    assert (claimed["outcome"], claimed["handoff"]) == ("quiet", "claimed")
    asked = turn("/ask where do I set the VAT rates?", stream=True)
    assert (asked["outcome"], asked["handoff"]) == ("answered", "claimed")

    api.post(f"/v1/handoffs/{handoff['id']}/resolve", headers=ALICE)
    back = turn("How do I record a payment?")
    assert (back["outcome"], back["handoff"]) == ("answered", None)


def test_a_client_who_did_not_want_a_person_after_all_gets_the_bot_back(api: TestClient) -> None:
    path = "/v1/conversations/api:shop:3/messages"
    asked = {"audience": "client", "author": "Ann", "text": "Can I talk to a human?"}
    assert api.post(path, json=asked, headers=CLIENT).json()["handoff"] == "open"
    never_mind = {
        "audience": "client",
        "author": "Ann",
        "text": "No no, I don't need a human, I just have a question",
    }
    back = api.post(path, json=never_mind, headers=CLIENT).json()
    assert (back["outcome"], back["handoff"]) == ("bot_back", None), back


def test_a_staff_member_s_own_widget_chat_stays_theirs_through_a_handoff(
    api: TestClient, settings: Settings
) -> None:
    settings.handoff.audiences = ["client", "staff"]
    turn = {"audience": "staff", "author": "alice", "text": "Can I talk to a human?"}
    asked = api.post("/v1/conversations/widget:alice:1/messages", json=turn, headers=ALICE)
    assert "person from our support team" in asked.json()["text"]
    (handoff,) = api.get("/v1/handoffs", headers=ALICE).json()
    path = f"/v1/handoffs/{handoff['id']}"

    assert api.get("/v1/handoffs", headers=BOB).json() == []
    theirs = "a staff member's own widget chats are theirs alone"
    for method, route in [("get", ""), ("post", "/claim"), ("post", "/resolve")]:
        refused = getattr(api, method)(path + route, headers=BOB)
        assert (refused.status_code, refused.json()) == (403, {"detail": theirs}), route
    written = api.post(f"{path}/messages", json={"text": "send me your token"}, headers=BOB)
    assert written.status_code == 403
    assert api.get("/v1/conversations/widget:alice:1", headers=BOB).status_code == 403
    mine = api.get("/v1/conversations/widget:alice:1", headers=ALICE).json()["messages"]
    assert "send me your token" not in {m["content"] for m in mine}
    assert api.get(path, headers=ALICE).json()["status"] == "open"  # nobody claimed it
