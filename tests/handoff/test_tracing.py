"""The Langfuse tag `handoff` on the turn that opened a handoff and on turns answered
during one (/ask), through the app against the local Langfuse endpoint."""

import json
import uuid
from collections import defaultdict
from pathlib import Path

from sqlalchemy import create_engine, select

from app.db.engine import sync_url
from app.db.models import Conversation, LLMCall, Turn
from app.settings import LangfuseSettings, Settings
from tests.conftest import make_client
from tests.handoff.test_drafts import ANSWERED, handed_over, say, use_staff_and_client
from tests.observability.conftest import LocalServer, exported_spans

KEY = "api:acme:traced"


def test_turns_of_a_handoff_are_tagged(
    settings: Settings, sample_index: Path, local_server: LocalServer
) -> None:
    settings.langfuse = LangfuseSettings(
        public_key=f"pk-lf-{uuid.uuid4().hex}", secret_key="sk-lf-test", base_url=local_server.url
    )
    with make_client(settings, sample_index) as client:
        for text in (
            "Will it rain in Oslo tomorrow?",
            "Who won the chess final?",
            "/ask invoices?",
        ):
            turn = {"audience": "client", "author": "Ann", "text": text}
            assert client.post(f"/v1/conversations/{KEY}/messages", json=turn).status_code == 200
    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        traces = list(connection.scalars(select(Turn.trace_id).order_by(Turn.number)))
    engine.dispose()

    tagged = {
        span["trace_id"]
        for span in exported_spans(local_server)
        if "handoff" in span.get("langfuse.trace.tags", [])
    }
    assert tagged == {traces[1], traces[2]}  # not the first: no handoff yet


def test_a_handoffs_card_and_draft_calls_are_on_the_turns_trace(
    settings: Settings, sample_index: Path, local_server: LocalServer
) -> None:
    """Every LLM call the database stores for a turn is a generation of that turn's trace:
    the card's summary and the drafted reply, made for the turn that asked for a person
    (which the bot did not answer) after it, included."""
    settings.langfuse = LangfuseSettings(
        public_key=f"pk-lf-{uuid.uuid4().hex}", secret_key="sk-lf-test", base_url=local_server.url
    )
    use_staff_and_client(settings)
    key = "api:acme:drafted"
    with make_client(settings, sample_index) as client:
        say(client, key, ANSWERED)
        assert handed_over(client, key)["draft"]["status"] == "drafted"
    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        rows = connection.execute(
            select(Turn.trace_id, LLMCall.purpose)
            .join(Conversation, Conversation.id == Turn.conversation_id)
            .join(
                LLMCall,
                (LLMCall.conversation_id == Turn.conversation_id) & (LLMCall.turn == Turn.number),
            )
            .where(Conversation.key == key)
        ).all()
    engine.dispose()
    stored: dict[str, list[str]] = defaultdict(list)
    for trace_id, purpose in rows:
        assert trace_id is not None
        stored[trace_id].append(purpose)
    exported: dict[str, list[str]] = defaultdict(list)
    for span in exported_spans(local_server):
        if span.get("langfuse.observation.type") == "generation":
            purpose = json.loads(span["langfuse.observation.metadata.supportbot_purpose"])
            exported[span["trace_id"]].append(purpose)
    assert {t: sorted(p) for t, p in exported.items()} == {t: sorted(p) for t, p in stored.items()}
    assert sorted(p for purposes in stored.values() for p in purposes).count("draft") >= 1
    assert "handoff" in [p for purposes in stored.values() for p in purposes]
    (asked,) = [t for t, purposes in stored.items() if "handoff" in purposes]
    tags = {
        tag
        for span in exported_spans(local_server)
        if span["trace_id"] == asked
        for tag in span.get("langfuse.trace.tags", [])
    }
    assert "outcome:handed_off" in tags  # the request the bot did not answer has its trace


def test_with_langfuse_down_a_handoff_still_gets_its_card_and_draft(
    settings: Settings, sample_index: Path, local_server: LocalServer
) -> None:
    """Langfuse answering 502 to every export: the spans of the card and the draft are
    lost, the handoff, its draft and their stored calls are not."""
    local_server.status = 502
    settings.langfuse = LangfuseSettings(
        public_key=f"pk-lf-{uuid.uuid4().hex}",
        secret_key="sk-lf-test",
        base_url=local_server.url,
        shutdown_timeout_seconds=1,
    )
    use_staff_and_client(settings)
    key = "api:acme:langfuse-down"
    with make_client(settings, sample_index) as client:
        say(client, key, ANSWERED)
        handoff = handed_over(client, key)
    assert handoff["draft"]["status"] == "drafted"
    assert handoff["draft"]["citations"]
    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        purposes = set(
            connection.scalars(
                select(LLMCall.purpose)
                .join(Conversation, Conversation.id == LLMCall.conversation_id)
                .where(Conversation.key == key)
            )
        )
    engine.dispose()
    assert {"handoff", "draft"} <= purposes
