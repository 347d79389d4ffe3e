"""Drafted replies on handoff cards, over HTTP: the offline model's extractive answer with
its source, "no draft" when the documentation has nothing, a real model's reply (the
scripted provider) recorded as a `draft` call; sent by staff as their own message, or
dismissed; never in the client's chat before that."""

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import create_engine, select

from app.bench.scripted_llm import Reply, ScriptedLLM
from app.chat.service import ChatService
from app.db.engine import sync_url
from app.db.models import LLMCall
from app.handoff.service import HandoffService
from app.settings import ApiKey, Settings
from tests.conftest import make_client
from tests.fakes import CapturingChatModel
from tests.handoff.test_flow import said
from tests.test_model_faults import scripted, use_scripted

__all__ = ["scripted"]  # the provider fixture


class HeldModel(CapturingChatModel):
    """The offline model, whose calls wait (until cancelled) once `hold` is set."""

    hold: bool = False
    held: int = 0  # calls waiting

    async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
        if self.hold:
            self.held += 1
            await asyncio.Event().wait()
        return await super()._agenerate(*args, **kwargs)


@pytest.fixture
def model() -> HeldModel:
    return HeldModel()


ALICE = {"authorization": "Bearer alice-api-token"}
CLIENT = {"authorization": "Bearer acme-client-key-0123456789"}
ANSWERED = "How do I create an invoice?"
NOT_IN_THE_DOCS = "Can I pay my invoices with a carrier pigeon?"
ASK_FOR_PERSON = "I want to talk to a human, please"


def use_staff_and_client(settings: Settings) -> None:
    settings.widget.staff_tokens = {"alice": SecretStr("alice-api-token")}
    settings.api.keys = {"acme": ApiKey(key=SecretStr("acme-client-key-0123456789"))}


@pytest.fixture
def api(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    use_staff_and_client(settings)
    with make_client(settings, sample_index) as client:
        yield client


def say(api: TestClient, key: str, text: str) -> dict[str, Any]:
    turn = {"audience": "client", "author": "Ann", "text": text}
    reply = api.post(f"/v1/conversations/{key}/messages", json=turn, headers=CLIENT)
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def handed_over(api: TestClient, key: str, question: str | None = None) -> dict[str, Any]:
    """Ask `question` (if any), then for a person; the handoff once its draft is made (the
    draft comes after the client's takeover notice, so it is waited for)."""
    if question is not None:
        say(api, key, question)
    assert "person from our support team" in say(api, key, ASK_FOR_PERSON)["text"]
    (handoff,) = api.get("/v1/handoffs", headers=ALICE).json()
    for _ in range(500):
        handoff = api.get(f"/v1/handoffs/{handoff['id']}", headers=ALICE).json()
        if handoff["draft"]["status"] != "drafting":
            return dict(handoff)
        time.sleep(0.02)
    raise AssertionError("the draft was never made")


def client_transcript(api: TestClient, key: str) -> list[tuple[str, str]]:
    messages = api.get(f"/v1/conversations/{key}", headers=CLIENT).json()["messages"]
    return [(m["role"], m["content"]) for m in messages]


def test_a_question_the_documentation_answers_gets_a_draft_with_its_source(
    api: TestClient,
) -> None:
    handoff = handed_over(api, "api:shop:drafted", ANSWERED)
    draft = handoff["draft"]
    assert draft["status"] == "drafted" and draft["reason"] == ""
    assert "invoice" in draft["text"].lower()
    assert [c["source"] for c in draft["citations"]] == ["en/create-invoice.md"]
    # Not sent, not stored as the bot's message: drafting added nothing to the client's
    # transcript (the question, its answer, the request for a person, the notice).
    said = client_transcript(api, "api:shop:drafted")
    assert [role for role, _ in said] == ["user", "assistant", "user", "assistant"]


def test_a_question_the_documentation_does_not_answer_gets_no_draft(api: TestClient) -> None:
    handoff = handed_over(api, "api:shop:nothing", NOT_IN_THE_DOCS)
    assert handoff["draft"] == {
        "status": "none",
        "text": "",
        "citations": [],
        "reason": "nothing relevant found",
    }


def test_a_request_for_a_person_with_no_question_gets_no_draft(api: TestClient) -> None:
    draft = handed_over(api, "api:shop:bare")["draft"]
    assert draft["status"] == "none" and draft["reason"] == "no open question"


def test_staff_send_the_edited_draft_as_their_own_message(api: TestClient) -> None:
    key = "api:shop:send"
    handoff = handed_over(api, key, ANSWERED)
    path = f"/v1/handoffs/{handoff['id']}"
    edited = f"Hello Ann! {handoff['draft']['text']}"
    unclaimed = api.post(
        f"{path}/messages", json={"text": edited, "from_draft": True}, headers=ALICE
    )
    assert unclaimed.status_code == 409  # sending needs the claim, as any reply does
    assert api.post(f"{path}/claim", headers=ALICE).status_code == 200
    sent = api.post(f"{path}/messages", json={"text": edited, "from_draft": True}, headers=ALICE)
    assert sent.status_code == 201
    last = api.get(f"/v1/conversations/{key}", headers=CLIENT).json()["messages"][-1]
    assert (last["role"], last["author"], last["content"]) == ("staff", "alice", edited)
    assert api.get(path, headers=ALICE).json()["draft"]["status"] == "sent"


def test_a_dismissed_draft_leaves_the_chat_untouched(api: TestClient) -> None:
    key = "api:shop:dismiss"
    handoff = handed_over(api, key, ANSWERED)
    before = api.get(f"/v1/conversations/{key}", headers=CLIENT).json()["messages"]
    dismissed = api.post(f"/v1/handoffs/{handoff['id']}/draft/dismiss", headers=ALICE)
    assert dismissed.status_code == 200 and dismissed.json()["draft"]["status"] == "dismissed"
    assert api.get(f"/v1/conversations/{key}", headers=CLIENT).json()["messages"] == before
    refused = api.post(f"/v1/handoffs/{handoff['id']}/draft/dismiss", headers=CLIENT)
    assert refused.status_code == 403  # a client neither sees nor settles drafts


def test_a_real_models_draft_is_its_reply_recorded_as_a_draft_call(
    settings: Settings, sample_index: Path, scripted: ScriptedLLM
) -> None:
    use_scripted(settings, scripted)
    use_staff_and_client(settings)
    drafted = "Open **Invoices → New invoice**, pick the customer and press Save."
    with make_client(settings, sample_index) as api:
        key = "api:shop:real"
        say(api, key, ANSWERED)  # the default policy: one search, then a quote
        asked = len(scripted.requests)
        scripted.add(Reply.call("search_knowledge_base", query="create an invoice"), Reply(drafted))
        handoff = handed_over(api, key)
        assert handoff["draft"]["status"] == "drafted"
        assert handoff["draft"]["text"] == drafted
        assert handoff["draft"]["citations"][0]["source"] == "en/create-invoice.md"
        draft_requests = scripted.requests[asked:]
        assert len(draft_requests) == 2  # the draft's search and its reply
        assert ANSWERED in str(draft_requests[0]["messages"][-1])
        said = client_transcript(api, key)
        assert said and not any(drafted in content for _, content in said)
    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        purposes = list(connection.scalars(select(LLMCall.purpose).order_by(LLMCall.id)))
    engine.dispose()
    assert purposes[-2:] == ["draft", "draft"]


async def test_a_draft_that_fails_is_no_draft_and_the_handoff_stands(
    chat: ChatService,
    handoffs: HandoffService,
    model: CapturingChatModel,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await chat.handle_turn(said(ANSWERED))
    model.fail_with = "the provider is down"
    with caplog.at_level(logging.ERROR, logger="app.handoff.service"):
        notice = await chat.handle_turn(said(ASK_FOR_PERSON))
        await chat.settled()
    assert (notice.outcome, notice.handoff) == ("handed_off", "open")
    (handoff,) = await handoffs.queue()
    assert handoff.draft == {
        "status": "none",
        "text": "",
        "citations": [],
        "reason": "drafting failed",
    }
    (logged,) = [r.getMessage() for r in caplog.records]
    assert "was not drafted" in logged and "the provider is down" in logged


async def test_a_draft_a_shutdown_stops_is_no_draft_rather_than_left_drafting(
    chat: ChatService, handoffs: HandoffService, model: HeldModel
) -> None:
    await chat.handle_turn(said(ANSWERED))
    model.hold = True
    await chat.handle_turn(said(ASK_FOR_PERSON))
    for _ in range(1000):  # until the draft's first model call waits
        if model.held:
            break
        await asyncio.sleep(0.01)
    await chat.aclose()
    (handoff,) = await handoffs.queue()
    assert handoff.draft is not None
    assert handoff.draft["reason"] == "drafting was interrupted (the service stopped)"
