"""Input limits of the HTTP API: body size, text that cannot be stored, integer ranges,
key charset, rate limits; every error an ErrorOut; timestamps with their time zone."""

import json
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import create_engine, select

from app.db.engine import sync_url
from app.db.models import Feedback, Message
from app.settings import ApiKey, Settings
from tests.conftest import make_client
from tests.test_api import metric
from tests.test_api_proxy import another_peer

QUESTION = "How do I create an invoice?"
SHOP_KEY = "shop-key-0123456789abcdef"
MALL_KEY = "mall-key-0123456789abcdef"
SHOP = {"authorization": f"Bearer {SHOP_KEY}"}
MALL = {"authorization": f"Bearer {MALL_KEY}"}
ALICE = {"authorization": "Bearer alice-token"}


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


def test_a_comment_over_its_limit_as_sent_is_a_422(client: TestClient) -> None:
    """2,000 characters as sent, a control character the cleaning removes included."""
    client.post("/v1/conversations/demo/messages", json=ask())
    feedback = "/v1/conversations/demo/turns/1/feedback"
    over = client.post(feedback, json={"rating": "down", "comment": "c" * 2000 + "\u0000"})
    assert over.status_code == 422, over.text
    assert client.post(feedback, json={"rating": "down", "comment": "c" * 2000}).status_code == 201


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
    # Windows of an hour: a sliding-window counter weighs the previous window by the share
    # of it still in reach, so turns that straddle a window's start may see one turn more.
    settings.api.conversation_rate = "2/hour"
    settings.api.caller_rate = "3/hour"
    settings.api.keys = {
        "shop": ApiKey(key=SecretStr(SHOP_KEY), prefix="api:shop:"),
        "mall": ApiKey(key=SecretStr(MALL_KEY), prefix="api:mall:"),
    }
    settings.widget.staff_tokens = {"alice": SecretStr("alice-token")}
    with make_client(settings, sample_index) as client:
        yield client


def test_a_conversation_gets_its_rate_then_a_429(limited: TestClient, settings: Settings) -> None:
    path = "/v1/conversations/api:shop:a/messages"
    assert limited.post(path, json=ask(), headers=SHOP).status_code == 200
    assert limited.post(path, json=ask(author="Bob"), headers=SHOP).status_code == 200
    third = limited.post(path + "/stream", json=ask(author="Cy"), headers=SHOP)
    assert third.status_code == 429
    assert 1 <= int(third.headers["retry-after"]) <= 3600
    assert third.json() == {
        "detail": "too many turns for this conversation (2 per 1 hour); "
        f"retry in {third.headers['retry-after']} s"
    }
    assert len(user_messages(settings)) == 2  # the refused turn stored nothing


def test_a_caller_gets_its_rate_whatever_author_it_names(
    limited: TestClient, settings: Settings
) -> None:
    """One API key naming a new author in each turn is still one caller."""
    for n, key in enumerate(("a", "b", "c")):
        posted = limited.post(
            f"/v1/conversations/api:shop:{key}/messages", json=ask(author=f"A{n}"), headers=SHOP
        )
        assert posted.status_code == 200
    refusals = metric(limited, "supportbot_rate_limited_total", scope="caller")
    refused = limited.post(
        "/v1/conversations/api:shop:d/messages", json=ask(author="Newcomer"), headers=SHOP
    )
    assert refused.status_code == 429 and "this caller" in refused.json()["detail"]
    assert int(refused.headers["retry-after"]) >= 1
    assert len(user_messages(settings)) == 3
    # Another credential has a window of its own.
    other = limited.post("/v1/conversations/api:mall:a/messages", json=ask(), headers=MALL)
    assert other.status_code == 200
    staff = limited.post("/v1/conversations/widget:alice:1/messages", json=ask(), headers=ALICE)
    assert staff.status_code == 200
    assert metric(limited, "supportbot_rate_limited_total", scope="caller") == refusals + 1


def test_staff_are_counted_by_their_credential(limited: TestClient, settings: Settings) -> None:
    for n in range(3):
        posted = limited.post(
            f"/v1/conversations/widget:alice:{n}/messages", json=ask(author=f"A{n}"), headers=ALICE
        )
        assert posted.status_code == 200
    refused = limited.post(
        "/v1/conversations/widget:alice:9/messages", json=ask(author="x"), headers=ALICE
    )
    assert refused.status_code == 429
    assert len(user_messages(settings)) == 3


def test_anonymous_callers_are_counted_by_their_address(
    settings: Settings, sample_index: Path
) -> None:
    settings.api.caller_rate = "2/hour"
    with make_client(settings, sample_index) as client:
        for n in range(2):
            posted = client.post(f"/v1/conversations/c{n}/messages", json=ask(author=f"A{n}"))
            assert posted.status_code == 200
        refused = client.post("/v1/conversations/c9/messages", json=ask(author="Zed"))
        assert refused.status_code == 429 and "this caller" in refused.json()["detail"]
        assert len(user_messages(settings)) == 2
        # The same app, another client address: a window of its own.
        elsewhere = another_peer(client, "192.0.2.7")
        assert elsewhere.post("/v1/conversations/c9/messages", json=ask()).status_code == 200


def test_a_callers_token_budget_is_spent_then_a_429(settings: Settings, sample_index: Path) -> None:
    settings.api.caller_token_budget = "500/hour"
    with make_client(settings, sample_index) as client:
        refusals = metric(client, "supportbot_rate_limited_total", scope="tokens")
        counted = metric(client, "supportbot_caller_tokens_total", kind="anonymous")
        first = client.post("/v1/conversations/a/messages", json=ask())
        assert first.status_code == 200
        spent = first.json()["usage"]["input_tokens"] + first.json()["usage"]["output_tokens"]
        assert spent > 500  # one offline turn spends the whole budget
        for path in ("/v1/conversations/b/messages", "/v1/conversations/b/messages/stream"):
            refused = client.post(path, json=ask(author="Someone else"))
            assert refused.status_code == 429, refused.text
            assert refused.json()["detail"].startswith(
                "this caller's model token budget is spent (500 per 1 hour); retry in"
            )
            assert 1 <= int(refused.headers["retry-after"]) <= 3600
        assert len(user_messages(settings)) == 1
        assert metric(client, "supportbot_rate_limited_total", scope="tokens") == refusals + 2
        assert metric(client, "supportbot_caller_tokens_total", kind="anonymous") == counted + spent


def test_a_streamed_turn_spends_the_budget_too(settings: Settings, sample_index: Path) -> None:
    settings.api.caller_token_budget = "500/hour"
    with make_client(settings, sample_index) as client:
        with client.stream("POST", "/v1/conversations/a/messages/stream", json=ask()) as stream:
            assert stream.status_code == 200
            assert "event: done" in "".join(stream.iter_text())
        assert client.post("/v1/conversations/b/messages", json=ask()).status_code == 429


def test_refused_input_counts_against_no_rate(limited: TestClient) -> None:
    for _ in range(4):
        refused = limited.post("/v1/conversations/api:shop:a/messages", json=ask(""), headers=SHOP)
        assert refused.status_code == 422
    assert (
        limited.post("/v1/conversations/api:shop:a/messages", json=ask(), headers=SHOP).status_code
        == 200
    )


def ten_turns_a_minute(settings: Settings, storage_url: str | None) -> Settings:
    settings.api.caller_rate = "10/minute"
    settings.api.keys = {"shop": ApiKey(key=SecretStr(SHOP_KEY), prefix="api:shop:")}
    settings.api.rate_limit_storage_url = storage_url
    return settings


def fifty_turns_at_once(clients: list[TestClient]) -> Counter[int]:
    """50 turns of one API key at once, each in a conversation of its own, spread over
    the clients (app instances): how many got each status."""

    def turn(n: int) -> int:
        path = f"/v1/conversations/api:shop:{n}/messages"
        client = clients[n % len(clients)]
        return client.post(path, json=ask(author=f"A{n}"), headers=SHOP).status_code

    # Windows in memory start on the clock's minutes: a burst across one would see the
    # turns of the minute before weighed at less than a whole turn each.
    if (left := 60 - time.time() % 60) < 10:
        time.sleep(left)
    with ThreadPoolExecutor(max_workers=50) as pool:
        return Counter(pool.map(turn, range(50)))


def test_fifty_concurrent_turns_of_one_key_get_ten_answers(
    settings: Settings, sample_index: Path, rate_limit_storage_url: str | None
) -> None:
    ten_turns_a_minute(settings, rate_limit_storage_url)
    with make_client(settings, sample_index) as client:
        assert fifty_turns_at_once([client]) == {200: 10, 429: 40}
    assert len(user_messages(settings)) == 10


def test_two_instances_sharing_redis_answer_ten_of_fifty_turns(
    settings: Settings, sample_index: Path, redis_url: str, tmp_path: Path
) -> None:
    first = ten_turns_a_minute(settings, redis_url)
    second = first.model_copy(deep=True)
    second.db.url = f"sqlite:///{tmp_path / 'second.db'}"
    with make_client(first, sample_index) as one, make_client(second, sample_index) as other:
        assert fifty_turns_at_once([one, other]) == {200: 10, 429: 40}
    assert len(user_messages(first)) + len(user_messages(second)) == 10
