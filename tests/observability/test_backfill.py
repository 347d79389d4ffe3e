"""`supportbot langfuse backfill`: a rating given while Langfuse was down reaches it later."""

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import create_engine, select
from typer.testing import CliRunner

from app.cli import cli
from app.db.engine import sync_url
from app.db.models import Feedback, Turn
from app.observability.tracing import feedback_score_id
from app.settings import Settings, get_settings
from tests.conftest import make_client

from .conftest import LocalServer, exported_scores
from .test_tracing import langfuse_settings


@pytest.fixture
def fresh_settings() -> Iterator[None]:
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _stored(settings: Settings) -> tuple[str | None, list[Feedback]]:
    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        trace_id = connection.scalar(select(Turn.trace_id))
        rows = list(connection.execute(select(Feedback)))
    engine.dispose()
    return trace_id, [Feedback(**row._mapping) for row in rows]


def test_feedback_lost_in_an_outage_is_sent_again_once(
    settings: Settings,
    sample_index: Path,
    local_server: LocalServer,
    monkeypatch: pytest.MonkeyPatch,
    fresh_settings: None,
) -> None:
    local_server.status = 502
    settings.langfuse = langfuse_settings(
        local_server, export_timeout_seconds=1, shutdown_timeout_seconds=1
    )
    settings.widget.staff_tokens = {"alice": SecretStr("t")}
    key, staff = "widget:alice:1", {"authorization": "Bearer t"}
    with make_client(settings, sample_index) as client:
        asked = client.post(
            f"/v1/conversations/{key}/messages",
            json={"audience": "staff", "author": "alice", "text": "How do I create an invoice?"},
            headers=staff,
        )
        assert asked.status_code == 200
        rated = client.post(
            f"/v1/conversations/{key}/turns/1/feedback",
            json={"rating": "down", "comment": "too short"},
            headers=staff,
        )
        assert rated.status_code == 201
    trace_id, [feedback] = _stored(settings)
    assert feedback.score_confirmed_at is None

    local_server.status = 200  # Langfuse is back
    local_server.requests.clear()
    monkeypatch.setenv("SUPPORTBOT_DB__URL", settings.db.url)
    monkeypatch.setenv("SUPPORTBOT_LANGFUSE__BASE_URL", local_server.url)
    # A new process would reuse the key; in this one the SDK keeps the app's closed client.
    monkeypatch.setenv("SUPPORTBOT_LANGFUSE__PUBLIC_KEY", f"pk-lf-{uuid.uuid4().hex}")
    monkeypatch.setenv("SUPPORTBOT_LANGFUSE__SECRET_KEY", "sk-lf-test")
    runner = CliRunner()

    first = runner.invoke(cli, ["langfuse", "backfill"])
    again = runner.invoke(cli, ["langfuse", "backfill"])

    assert first.exit_code == 0, first.output
    assert "1 feedback scores sent, 1 confirmed" in first.output
    assert "0 feedback scores sent" in again.output
    # The app's own exporter may still deliver what it queued in the outage once Langfuse is
    # back (its thread outlives the bounded shutdown): the turn's other scores, and copies of
    # the feedback score under the same id, which Langfuse keeps as one.
    feedback_scores = [s for s in exported_scores(local_server) if s["name"] == "user_feedback"]
    [score] = {score["id"]: score for score in feedback_scores}.values()
    assert (score["name"], score["value"], score["traceId"]) == ("user_feedback", 0.0, trace_id)
    assert score["comment"] == "too short"
    assert score["id"] == feedback_score_id(score["traceId"], feedback.id)  # replaces, not adds
    _, [confirmed] = _stored(settings)
    assert confirmed.score_confirmed_at is not None
