"""The two message endpoints forward the turn's outcome: 502 with the documented body when
a turn fails, an `error` event in the stream, 4xx before the stream starts (SQLite)."""

import json
from pathlib import Path

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr
from sqlalchemy import create_engine, select, text
from sqlalchemy.orm import Session

from app.chat.types import FAILED_KEPT, NOT_KEPT
from app.db import migrate
from app.db.engine import sync_url
from app.db.models import Turn
from app.settings import LLMSettings, Settings
from tests.conftest import make_client

ASK = {"audience": "client", "author": "Jo", "text": "How do I create an invoice?"}


def execute(settings: Settings, statement: str) -> None:
    engine = create_engine(sync_url(settings.db.url))
    with engine.begin() as connection:
        connection.execute(text(statement))
    engine.dispose()


def statuses(settings: Settings) -> list[str]:
    engine = create_engine(sync_url(settings.db.url))
    with Session(engine) as session:
        found = list(session.scalars(select(Turn.status).order_by(Turn.id)))
    engine.dispose()
    return found


def turns_counted(client: TestClient, status: str, channel: str) -> float:
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "supportbot_turns_total" and sample.labels == {
                "status": status,
                "channel": channel,
            }:
                return sample.value
    return 0.0


def events(body: str) -> list[tuple[str, object]]:
    parsed = []
    for block in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        parsed.append((fields["event"], json.loads(fields["data"])))
    return parsed


def test_a_database_failure_after_the_message_is_stored_answers_502(
    settings: Settings, sample_index: Path
) -> None:
    migrate.upgrade(settings.db.url)
    execute(
        settings,
        """CREATE TRIGGER refuse_answers BEFORE INSERT ON messages WHEN NEW.role <> 'user'
           BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END""",
    )
    with make_client(settings, sample_index) as client:
        failed_before = turns_counted(client, "failed", "api")
        response = client.post("/v1/conversations/db-fault/messages", json=ASK)
        assert response.status_code == 502
        assert response.json() == {"detail": FAILED_KEPT}
        history = client.get("/v1/conversations/db-fault").json()
        assert turns_counted(client, "failed", "api") == failed_before + 1
    assert [m["content"] for m in history["messages"]] == [ASK["text"]]
    assert statuses(settings) == ["failed"]


def test_a_message_that_could_not_be_stored_says_so(settings: Settings, sample_index: Path) -> None:
    migrate.upgrade(settings.db.url)
    execute(
        settings,
        """CREATE TRIGGER refuse_questions BEFORE INSERT ON messages WHEN NEW.role = 'user'
           BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END""",
    )
    with make_client(settings, sample_index) as client:
        response = client.post("/v1/conversations/lost/messages", json=ASK)
        streamed = client.post("/v1/conversations/lost/messages/stream", json=ASK)
        history = client.get("/v1/conversations/lost")
    assert (response.status_code, response.json()) == (502, {"detail": NOT_KEPT})
    assert events(streamed.text) == [("error", {"detail": NOT_KEPT, "message_kept": False})]
    assert history.status_code == 404 and statuses(settings) == []  # rolled back whole


def test_an_unexpected_provider_error_arrives_as_an_error_event(
    settings: Settings, sample_index: Path
) -> None:
    # An OpenAI-compatible endpoint on a closed local port: the client library raises.
    settings.llm = LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="k")
    with make_client(settings, sample_index) as client:
        response = client.post("/v1/conversations/provider-down/messages/stream", json=ASK)
        history = client.get("/v1/conversations/provider-down").json()
    assert response.status_code == 200
    assert events(response.text) == [("error", {"detail": FAILED_KEPT, "message_kept": True})]
    assert [m["content"] for m in history["messages"]] == [ASK["text"]]
    assert statuses(settings) == ["failed"]


def test_the_stream_refuses_another_audience_before_it_starts(
    settings: Settings, sample_index: Path
) -> None:
    settings.widget.staff_tokens = {"alice": SecretStr("alice-token")}
    staff = {"authorization": "Bearer alice-token"}
    with make_client(settings, sample_index) as client:
        created = client.post(
            "/v1/conversations/widget:alice:1/messages",
            json={**ASK, "audience": "staff"},
            headers=staff,
        )
        assert created.status_code == 200
        as_client = client.post(
            "/v1/conversations/widget:alice:1/messages/stream", json=ASK, headers=staff
        )
        assert as_client.status_code == 422
        assert "belongs to the staff audience" in as_client.json()["detail"]
    assert statuses(settings) == ["ok"]  # the refused message started no turn
