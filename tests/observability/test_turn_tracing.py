"""A whole turn through the app with Langfuse on: one trace per turn in the conversation's
session, with its scores, and the widget's feedback as a score on that trace."""

import uuid
from pathlib import Path

from pydantic import SecretStr
from sqlalchemy import create_engine, select

from app.db.engine import sync_url
from app.db.models import Turn
from app.settings import ApiKey, LangfuseSettings, Settings
from tests.conftest import make_client

from .conftest import LocalServer, exported_scores, exported_spans


def test_turns_are_traced_scored_and_rated(
    settings: Settings, sample_index: Path, local_server: LocalServer
) -> None:
    settings.langfuse = LangfuseSettings(
        public_key=f"pk-lf-{uuid.uuid4().hex}", secret_key="sk-lf-test", base_url=local_server.url
    )
    settings.widget.staff_tokens = {"alice": SecretStr("t")}
    key, staff = "widget:alice:7", {"authorization": "Bearer t"}
    with make_client(settings, sample_index) as client:
        for text in ("How do I create an invoice?", "How do I record a payment?"):
            reply = client.post(
                f"/v1/conversations/{key}/messages",
                json={"audience": "staff", "author": "alice", "text": text},
                headers=staff,
            )
            assert reply.status_code == 200
        rated = client.post(
            f"/v1/conversations/{key}/turns/2/feedback", json={"rating": "up"}, headers=staff
        )
        assert rated.status_code == 201
    # Leaving the client shut the app down, which flushed the tracer.

    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        stored = list(connection.scalars(select(Turn.trace_id).order_by(Turn.number)))
    engine.dispose()
    trace_ids = [trace_id for trace_id in stored if trace_id is not None]
    assert len(set(trace_ids)) == len(stored) == 2

    spans = exported_spans(local_server)
    assert {span["trace_id"] for span in spans} == set(trace_ids)
    assert {span["session.id"] for span in spans} == {key}
    generations = [s for s in spans if s.get("langfuse.observation.type") == "generation"]
    assert len(generations) == 4  # two model calls per turn

    scores = exported_scores(local_server)
    by_trace: dict[str, set[str]] = {}
    for score in scores:
        by_trace.setdefault(score["traceId"], set()).add(score["name"])
    turn_scores = {"cache_hit_rate", "context_tokens", "prefix_kept", "resolved"}
    assert by_trace[trace_ids[0]] == turn_scores
    assert by_trace[trace_ids[1]] == {*turn_scores, "user_feedback"}
    feedback = next(s for s in scores if s["name"] == "user_feedback")
    assert feedback["value"] == 1.0


def test_every_span_of_a_turn_carries_its_session_and_user(
    settings: Settings, sample_index: Path, local_server: LocalServer
) -> None:
    """Remembering, answering with the memory block, a 👎 (tagged on the rated turn's
    trace afterwards, by another person) and two answers that found nothing (the second
    handed over and tagged `handoff`): each span Langfuse gets is found by the
    conversation's session and the asker's user id."""
    settings.langfuse = LangfuseSettings(
        public_key=f"pk-lf-{uuid.uuid4().hex}", secret_key="sk-lf-test", base_url=local_server.url
    )
    shop = {"authorization": "Bearer shop-key-0123456789abcdef"}
    settings.api.keys = {"shop": ApiKey(key=SecretStr(shop["authorization"][7:]), prefix="api:")}
    key = "api:shop:1"
    with make_client(settings, sample_index) as client:
        for text in (
            "Remember that our currency is CHF",
            "How do I create an invoice?",
            "How do I export payroll?",
            "Payroll for freelancers?",
        ):
            reply = client.post(
                f"/v1/conversations/{key}/messages",
                json={"audience": "client", "author": "Ann", "text": text, "person": "u-1"},
                headers=shop,
            )
            assert reply.status_code == 200, reply.text
        rated = client.post(
            f"/v1/conversations/{key}/turns/2/feedback",
            json={"rating": "down", "author": "Bob"},
            headers=shop,
        )
        assert rated.status_code == 201

    spans = exported_spans(local_server)
    names = {span["name"] for span in spans}
    assert {"outcome:rated_down", "handoff"} <= names  # the spans tagged after the answer
    assert len({span["trace_id"] for span in spans}) == 4
    unfound = [
        span["name"]
        for span in spans
        if (span.get("session.id"), span.get("user.id")) != (key, "Ann")
    ]
    assert unfound == []
