"""The staff widget's HTTP side without a browser: auth rules, the SSE event sequence,
the static files, CORS."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import create_engine, select

from app.db.engine import sync_url
from app.db.models import Feedback
from app.settings import Settings
from tests.conftest import make_client

STAFF = {"authorization": "Bearer alice-token"}
KEY = "widget:alice:1"


@pytest.fixture
def staff_client(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    settings.widget.staff_tokens = {"alice": SecretStr("alice-token")}
    settings.widget.allowed_origins = ["https://crm.example.com"]
    with make_client(settings, sample_index) as client:
        yield client


def ask(text: str, audience: str = "staff") -> dict[str, str]:
    return {"audience": audience, "author": "alice", "text": text}


def events(body: str) -> list[tuple[str, dict[str, object]]]:
    """Parse a text/event-stream body into (event, data) pairs."""
    parsed = []
    for block in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        parsed.append((fields["event"], json.loads(fields["data"])))
    return parsed


def test_the_stream_sends_tokens_then_the_whole_reply(staff_client: TestClient) -> None:
    response = staff_client.post(
        f"/v1/conversations/{KEY}/messages/stream",
        json=ask("How do I create an invoice?"),
        headers=STAFF,
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    sequence = events(response.text)
    kinds = [kind for kind, _ in sequence]
    assert kinds[-1] == "done" and set(kinds[:-1]) == {"token"} and len(kinds) > 3
    done = sequence[-1][1]
    streamed = "".join(str(data["text"]) for kind, data in sequence if kind == "token")
    assert streamed == done["text"]
    assert done["profile"] == "staff" and done["turn"] == 1
    assert any(c["source"] == "en/create-invoice.md" for c in done["citations"])  # type: ignore[attr-defined]

    history = staff_client.get(f"/v1/conversations/{KEY}", headers=STAFF).json()
    assert history["messages"][-1]["content"] == done["text"]


def test_bad_input_is_refused_before_the_stream_starts(staff_client: TestClient) -> None:
    response = staff_client.post(
        f"/v1/conversations/{KEY}/messages/stream", json=ask(""), headers=STAFF
    )
    assert response.status_code == 422
    assert response.json() == {"detail": "the message is empty"}


@pytest.mark.parametrize(
    ("headers", "status", "detail"),
    [
        # an anonymous client may not write a widget conversation at all
        ({}, 403, "conversations of the Telegram bot and the staff widget need staff credentials"),
        ({"authorization": "Bearer wrong"}, 401, "invalid credentials"),
    ],
)
def test_without_staff_credentials_nothing_is_stored(
    staff_client: TestClient, headers: dict[str, str], status: int, detail: str
) -> None:
    for path in ("messages", "messages/stream"):
        response = staff_client.post(
            f"/v1/conversations/{KEY}/{path}", json=ask("hello"), headers=headers
        )
        assert (response.status_code, response.json()) == (status, {"detail": detail})
    assert staff_client.get("/v1/widget/me", headers=headers).status_code == 401
    assert staff_client.get(f"/v1/conversations/{KEY}", headers=STAFF).status_code == 404


def test_a_client_can_never_get_the_staff_profile(staff_client: TestClient) -> None:
    # First come is not first served: a client cannot claim the widget key before alice.
    squatted = staff_client.post(
        f"/v1/conversations/{KEY}/messages", json=ask("hello", audience="client")
    )
    assert squatted.status_code == 403
    assert squatted.json() == {
        "detail": "conversations of the Telegram bot and the staff widget need staff credentials"
    }
    first = staff_client.post(f"/v1/conversations/{KEY}/messages", json=ask("hi"), headers=STAFF)
    assert first.status_code == 200 and first.json()["profile"] == "staff"
    # Alice herself cannot turn her staff conversation into a client one.
    as_client = staff_client.post(
        f"/v1/conversations/{KEY}/messages", json=ask("hello", audience="client"), headers=STAFF
    )
    assert as_client.status_code == 422
    assert "belongs to the staff audience" in as_client.json()["detail"]
    assert staff_client.get(f"/v1/conversations/{KEY}").status_code == 403


def test_a_refusal_found_when_the_turn_starts_is_a_422_on_the_stream_too(
    staff_client: TestClient,
) -> None:
    staff_client.post(f"/v1/conversations/{KEY}/messages", json=ask("hi"), headers=STAFF)
    response = staff_client.post(
        f"/v1/conversations/{KEY}/messages/stream", json=ask("hi", audience="client"), headers=STAFF
    )
    assert response.status_code == 422
    assert "belongs to the staff audience" in response.json()["detail"]


def test_staff_sign_in_by_token_or_trusted_header(settings: Settings, sample_index: Path) -> None:
    settings.widget.staff_tokens = {"alice": SecretStr("alice-token")}
    settings.widget.trusted_user_header = "X-Forwarded-User"
    with make_client(settings, sample_index) as client:
        assert client.get("/v1/widget/me", headers=STAFF).json() == {"name": "alice"}
        by_proxy = client.get("/v1/widget/me", headers={"X-Forwarded-User": "bob"})
        assert by_proxy.json() == {"name": "bob"}


def test_the_widget_is_served_and_cors_is_limited(staff_client: TestClient) -> None:
    page = staff_client.get("/widget")
    assert page.status_code == 200 and '<main id="supportbot"' in page.text
    assert (
        staff_client.get("/widget/embed.js").headers["content-type"].startswith("text/javascript")
    )
    assert staff_client.get("/widget/static/widget.js").status_code == 200
    allowed = staff_client.options(
        "/v1/widget/me",
        headers={"origin": "https://crm.example.com", "access-control-request-method": "GET"},
    )
    assert allowed.headers["access-control-allow-origin"] == "https://crm.example.com"
    other = staff_client.options(
        "/v1/widget/me",
        headers={"origin": "https://evil.example.com", "access-control-request-method": "GET"},
    )
    assert "access-control-allow-origin" not in other.headers


def test_feedback_is_stored_and_guarded(staff_client: TestClient, settings: Settings) -> None:
    staff_client.post(
        f"/v1/conversations/{KEY}/messages", json=ask("How do I create an invoice?"), headers=STAFF
    )
    path = f"/v1/conversations/{KEY}/turns/1/feedback"
    rating = {"rating": "down", "comment": "missing the due date"}
    assert staff_client.post(path, json=rating).status_code == 403  # not staff
    assert staff_client.post(path, json={"rating": "meh"}, headers=STAFF).status_code == 422
    missing = f"/v1/conversations/{KEY}/turns/9/feedback"
    assert staff_client.post(missing, json=rating, headers=STAFF).status_code == 404
    assert staff_client.post(path, json=rating, headers=STAFF).status_code == 201

    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        rows = connection.execute(
            select(Feedback.turn, Feedback.rating, Feedback.comment, Feedback.author)
        ).all()
    engine.dispose()
    assert rows == [(1, "down", "missing the due date", "alice")]
