"""Input limits of the HTTP API: body size, text that cannot be stored, integer ranges,
key charset, rate limits; every error an ErrorOut; timestamps with their time zone."""

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select

from app.db.engine import sync_url
from app.db.models import Feedback, Message
from app.settings import Settings
from tests.conftest import make_client

QUESTION = "How do I create an invoice?"


def ask(text: str = QUESTION, author: str = "Ann") -> dict[str, str]:
    return {"audience": "client", "author": author, "text": text}


def post_raw(client: TestClient, path: str, body: str | bytes) -> tuple[int, dict[str, object]]:
    """Send a body exactly as given (JSON escapes such as a lone surrogate included)."""
    response = client.post(path, content=body, headers={"content-type": "application/json"})
    return response.status_code, response.json()


def user_messages(settings: Settings) -> list[str]:
    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        rows = connection.execute(
            select(Message.content).where(Message.role == "user").order_by(Message.id)
        ).all()
    engine.dispose()
    return [row[0] for row in rows]


@pytest.fixture
def small_body(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    settings.api.max_body_bytes = 2000
    with make_client(settings, sample_index) as client:
        yield client


def test_a_body_over_the_limit_is_413_with_or_without_a_length(
    small_body: TestClient, settings: Settings
) -> None:
    expected = {"detail": "the request body is larger than 2000 bytes"}
    padded = json.dumps({**ask(), "padding": "x" * 3000})
    status, body = post_raw(small_body, "/v1/conversations/demo/messages", padded)
    assert (status, body) == (413, expected)

    def chunks() -> Iterator[bytes]:  # no Content-Length: Transfer-Encoding: chunked
        for _ in range(10):
            yield b" " * 500

    chunked = small_body.post(
        "/v1/conversations/demo/messages",
        content=chunks(),
        headers={"content-type": "application/json"},
    )
    assert chunked.request.headers.get("transfer-encoding") == "chunked"
    assert (chunked.status_code, chunked.json()) == (413, expected)
    assert user_messages(settings) == []
    within = small_body.post("/v1/conversations/demo/messages", json=ask())
    assert within.status_code == 200


@pytest.mark.parametrize(
    ("raw_text", "detail"),
    [
        ("\\ud800", "text: the text contains a lone UTF-16 surrogate, which is not a character"),
        ("hi \\udfff", "text: the text contains a lone UTF-16 surrogate, which is not a character"),
        ("\\u200b\\u200d", "text: the text has no visible characters"),
        ("\\u0000", "text: the text has no visible characters"),
    ],
)
def test_text_that_cannot_be_stored_is_a_422(
    client: TestClient, settings: Settings, raw_text: str, detail: str
) -> None:
    body = '{"audience": "client", "author": "Ann", "text": "' + raw_text + '"}'
    assert post_raw(client, "/v1/conversations/demo/messages", body) == (422, {"detail": detail})
    assert user_messages(settings) == []


def test_text_is_stored_clean(client: TestClient, settings: Settings) -> None:
    body = (
        '{"audience": "client", "author": "A\\u0000nn",'
        ' "text": "How do I cre\\u0000ate an invoi\\u0063\\u0301e?"}'
    )
    status, reply = post_raw(client, "/v1/conversations/demo/messages", body)
    assert status == 200, reply
    assert user_messages(settings) == ["How do I create an invoiće?"]
    first = client.get("/v1/conversations/demo").json()["messages"][0]
    assert first["author"] == "Ann"


@pytest.mark.parametrize(
    "key",
    ["a%00b", "a%20b", "%ED%A0%80", "k" * 129, "a;b", "%C3%A9"],
)
def test_keys_outside_the_charset_are_a_422(client: TestClient, key: str) -> None:
    for response in (
        client.post(f"/v1/conversations/{key}/messages", json=ask()),
        client.get(f"/v1/conversations/{key}"),
        client.get(f"/v1/conversations/{key}/usage"),
        client.post(f"/v1/conversations/{key}/turns/1/feedback", json={"rating": "up"}),
    ):
        assert response.status_code == 422, (key, response.text)
        assert response.json()["detail"].startswith("key: String should match pattern")


def test_the_longest_key_and_turn_number_are_taken(client: TestClient) -> None:
    assert client.get(f"/v1/conversations/{'k' * 128}").status_code == 404
    client.post("/v1/conversations/demo/messages", json=ask())
    rating = {"rating": "up"}
    top = client.post(f"/v1/conversations/demo/turns/{2**31 - 1}/feedback", json=rating)
    assert top.status_code == 404
    over = client.post(f"/v1/conversations/demo/turns/{2**31}/feedback", json=rating)
    assert over.status_code == 422
    assert over.json() == {"detail": "turn: Input should be less than or equal to 2147483647"}
    assert client.post("/v1/conversations/demo/turns/0/feedback", json=rating).status_code == 422


def test_a_comment_is_stored_clean(client: TestClient, settings: Settings) -> None:
    client.post("/v1/conversations/demo/messages", json=ask())
    body = '{"rating": "down", "comment": "missing\\u0000 the due date\\r\\n", "author": "Ann"}'
    assert post_raw(client, "/v1/conversations/demo/turns/1/feedback", body)[0] == 201
    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        assert connection.execute(select(Feedback.comment)).scalars().all() == [
            "missing the due date\n"
        ]
    engine.dispose()


def test_timestamps_carry_their_time_zone_on_sqlite(client: TestClient) -> None:
    client.post("/v1/conversations/demo/messages", json=ask())
    for message in client.get("/v1/conversations/demo").json()["messages"]:
        created = datetime.fromisoformat(message["created_at"])
        assert created.utcoffset() is not None and created.utcoffset().total_seconds() == 0  # type: ignore[union-attr]


def test_every_error_is_an_error_out(client: TestClient) -> None:
    for response, status in [
        (client.get("/v1/nowhere"), 404),
        (client.delete("/v1/conversations/demo"), 405),
        (client.get("/v1/conversations/demo"), 404),
        (client.post("/v1/conversations/demo/messages", json={"text": 1}), 422),
        (
            client.post(
                "/v1/conversations/demo/messages",
                content=b'{"text": "\xff"}',
                headers={"content-type": "application/json"},
            ),
            400,
        ),
    ]:
        assert response.status_code == status
        body = response.json()
        assert set(body) == {"detail"} and isinstance(body["detail"], str), body


def test_the_schema_documents_every_error_as_an_error_out(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    for path, operations in schema["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for method, operation in operations.items():
            codes = {code for code in operation["responses"] if code.startswith(("4", "5"))}
            assert {"401", "403"} <= codes, (method, path)
            for code in codes:
                content = operation["responses"][code]["content"]["application/json"]
                assert content["schema"] == {"$ref": "#/components/schemas/ErrorOut"}


@pytest.fixture
def limited(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    settings.api.conversation_rate = "2/minute"
    settings.api.author_rate = "3/minute"
    with make_client(settings, sample_index) as client:
        yield client


def test_a_conversation_gets_its_rate_then_a_429(limited: TestClient, settings: Settings) -> None:
    assert limited.post("/v1/conversations/a/messages", json=ask()).status_code == 200
    assert limited.post("/v1/conversations/a/messages", json=ask(author="Bob")).status_code == 200
    third = limited.post("/v1/conversations/a/messages/stream", json=ask(author="Cy"))
    assert third.status_code == 429
    assert 1 <= int(third.headers["retry-after"]) <= 60
    assert third.json() == {
        "detail": "too many turns for this conversation (2 per 1 minute); "
        f"retry in {third.headers['retry-after']} s"
    }
    assert len(user_messages(settings)) == 2  # the refused turn stored nothing


def test_an_author_gets_its_rate_across_conversations(limited: TestClient) -> None:
    for key in ("a", "b", "c"):
        assert limited.post(f"/v1/conversations/{key}/messages", json=ask()).status_code == 200
    refused = limited.post("/v1/conversations/d/messages", json=ask())
    assert refused.status_code == 429 and "this author" in refused.json()["detail"]
    assert limited.post("/v1/conversations/d/messages", json=ask(author="Bob")).status_code == 200


def test_refused_input_counts_against_no_rate(limited: TestClient) -> None:
    for _ in range(4):
        assert limited.post("/v1/conversations/a/messages", json=ask("")).status_code == 422
    assert limited.post("/v1/conversations/a/messages", json=ask()).status_code == 200
