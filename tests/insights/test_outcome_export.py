"""Turns' outcomes leave the service as a Prometheus label and as Langfuse tags and the
`resolved` score, a 👎 as `rated_down` in both."""

import uuid
from pathlib import Path

from pydantic import SecretStr

from app.observability import metrics
from app.settings import LangfuseSettings, Settings
from tests.conftest import make_client
from tests.observability.conftest import LocalServer, exported_scores, exported_spans


def outcome_count(outcome: str) -> float:
    labels = {"outcome": outcome, "audience": "staff", "channel": "widget"}
    return metrics.REGISTRY.get_sample_value("supportbot_turn_outcomes_total", labels) or 0.0


def test_outcomes_are_counted_tagged_and_scored(
    settings: Settings, sample_index: Path, local_server: LocalServer
) -> None:
    settings.langfuse = LangfuseSettings(
        public_key=f"pk-lf-{uuid.uuid4().hex}", secret_key="sk-lf-test", base_url=local_server.url
    )
    settings.widget.staff_tokens = {"alice": SecretStr("t")}
    key, staff = "widget:alice:9", {"authorization": "Bearer t"}
    names = ("answered", "not_found", "rated_down")
    before = {name: outcome_count(name) for name in names}
    with make_client(settings, sample_index) as client:
        for text in ("How do I create an invoice?", "Which stadium hosts the football final?"):
            reply = client.post(
                f"/v1/conversations/{key}/messages",
                json={"audience": "staff", "author": "alice", "text": text},
                headers=staff,
            )
            assert reply.status_code == 200, reply.text
        rated = client.post(
            f"/v1/conversations/{key}/turns/1/feedback", json={"rating": "down"}, headers=staff
        )
        assert rated.status_code == 201
    assert {name: outcome_count(name) - before[name] for name in names} == {
        "answered": 1,
        "not_found": 1,
        "rated_down": 1,
    }

    spans = exported_spans(local_server)
    tags_by_trace: dict[str, set[str]] = {}
    for span in spans:
        tags_by_trace.setdefault(span["trace_id"], set()).update(
            span.get("langfuse.trace.tags", [])
        )
    resolved = {
        s["traceId"]: s["value"] for s in exported_scores(local_server) if s["name"] == "resolved"
    }
    assert sorted(resolved.values()) == [0.0, 1.0]
    answered_trace = next(t for t, value in resolved.items() if value == 1.0)
    not_found_trace = next(t for t, value in resolved.items() if value == 0.0)
    assert {"outcome:answered", "outcome:rated_down"} <= tags_by_trace[answered_trace]
    assert "outcome:not_found" in tags_by_trace[not_found_trace]
    assert "outcome:rated_down" not in tags_by_trace[not_found_trace]
