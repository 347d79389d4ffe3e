"""Who may do what over `/v1`: API keys limited to their key prefix, staff, anonymous
clients only while the API is open (no keys, loopback); the bind-address check."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr, ValidationError
from sqlalchemy import create_engine, select
from typer.testing import CliRunner

from app.api.exposure import UnsafeExposure
from app.api.main import create_app
from app.cli import cli
from app.db.engine import sync_url
from app.db.models import Conversation, Message
from app.settings import ApiKey, ApiSettings, Settings, get_settings
from tests.conftest import make_client

SHOP_KEY = "shop-key-0123456789abcdef"
SHOP = {"authorization": f"Bearer {SHOP_KEY}"}
ALICE = {"authorization": "Bearer alice-token"}
QUESTION = "How do I create an invoice?"


def ask(audience: str = "client", author: str = "Ann") -> dict[str, str]:
    return {"audience": audience, "author": author, "text": QUESTION}


def stored(settings: Settings) -> list[tuple[str, str, str]]:
    """(key, channel, audience) of every stored conversation."""
    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        rows = connection.execute(
            select(Conversation.key, Conversation.channel, Conversation.audience).order_by(
                Conversation.key
            )
        ).all()
    engine.dispose()
    return [tuple(row) for row in rows]  # type: ignore[misc]


@pytest.fixture
def keyed(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    """An API with a backend key (prefix `api:shop:`) and a staff member."""
    settings.api.keys = {"shop": ApiKey(key=SecretStr(SHOP_KEY), prefix="api:shop:")}
    settings.widget.staff_tokens = {"alice": SecretStr("alice-token")}
    with make_client(settings, sample_index) as client:
        yield client


def test_with_keys_configured_nobody_gets_in_without_credentials(keyed: TestClient) -> None:
    for method, path in [
        ("post", "/v1/conversations/api:shop:1/messages"),
        ("post", "/v1/conversations/api:shop:1/messages/stream"),
        ("get", "/v1/conversations/api:shop:1"),
        ("get", "/v1/conversations/api:shop:1/usage"),
        ("post", "/v1/conversations/api:shop:1/turns/1/feedback"),
        ("get", "/v1/widget/me"),
    ]:
        body = {"rating": "up"} if path.endswith("feedback") else ask()
        response = keyed.request(method, path, json=body if method == "post" else None)
        assert response.status_code == 401, (path, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
        assert set(response.json()) == {"detail"}
    wrong = keyed.get("/v1/conversations/api:shop:1", headers={"authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json() == {"detail": "invalid credentials"}


def test_a_backend_key_stays_inside_its_prefix(keyed: TestClient, settings: Settings) -> None:
    answered = keyed.post("/v1/conversations/api:shop:1/messages", json=ask(), headers=SHOP)
    assert answered.status_code == 200, answered.text
    assert keyed.get("/v1/conversations/api:shop:1", headers=SHOP).status_code == 200
    assert keyed.get("/v1/conversations/api:shop:1/usage", headers=SHOP).status_code == 200
    feedback = keyed.post(
        "/v1/conversations/api:shop:1/turns/1/feedback", json={"rating": "up"}, headers=SHOP
    )
    assert feedback.status_code == 201

    for key in ("telegram:-1001234567890", "widget:alice:1", "api:other:1", "demo"):
        for path in (
            f"/v1/conversations/{key}/messages",
            f"/v1/conversations/{key}/messages/stream",
        ):
            refused = keyed.post(path, json=ask(), headers=SHOP)
            assert refused.status_code == 403, (key, refused.text)
        assert keyed.get(f"/v1/conversations/{key}", headers=SHOP).status_code == 403
    assert keyed.get("/v1/conversations/api:other:1", headers=SHOP).json() == {
        "detail": "this API key may only use conversation keys starting with 'api:shop:'"
    }
    # Staff things never with a client key.
    staff_audience = keyed.post(
        "/v1/conversations/api:shop:2/messages", json=ask("staff"), headers=SHOP
    )
    assert staff_audience.status_code == 403
    assert keyed.get("/v1/widget/me", headers=SHOP).status_code == 403
    assert stored(settings) == [("api:shop:1", "api", "client")]


def test_staff_write_their_own_widget_chats_and_read_everything(
    keyed: TestClient, settings: Settings
) -> None:
    keyed.post("/v1/conversations/api:shop:1/messages", json=ask(), headers=SHOP)
    mine = keyed.post(
        "/v1/conversations/widget:alice:1/messages", json=ask("staff", "mallory"), headers=ALICE
    )
    assert mine.status_code == 200, mine.text
    history = keyed.get("/v1/conversations/widget:alice:1", headers=ALICE).json()
    assert history["messages"][0]["author"] == "alice"  # the credential's name, not the body's
    assert keyed.get("/v1/conversations/api:shop:1", headers=ALICE).status_code == 200

    for key in ("widget:bob:1", "telegram:42", "api:shop:1", "demo"):
        refused = keyed.post(f"/v1/conversations/{key}/messages", json=ask(), headers=ALICE)
        assert refused.status_code == 403, (key, refused.text)
    assert keyed.get("/v1/conversations/widget:alice:1", headers=SHOP).status_code == 403
    # The channel comes from the credential.
    assert stored(settings) == [
        ("api:shop:1", "api", "client"),
        ("widget:alice:1", "widget", "staff"),
    ]


def test_the_open_api_keeps_the_adapters_keys_to_themselves(
    client: TestClient, settings: Settings
) -> None:
    """No keys, loopback: anonymous clients may use any key but the bot's and the widget's."""
    assert client.post("/v1/conversations/demo/messages", json=ask()).status_code == 200
    for key in ("telegram:-1001234567890", "telegram:42:7", "widget:alice:1"):
        posted = client.post(f"/v1/conversations/{key}/messages", json=ask())
        assert posted.status_code == 403, posted.text
        # Refused before any lookup: a 403, never a 404 that says the chat does not exist.
        assert client.get(f"/v1/conversations/{key}").status_code == 403
        assert client.get(f"/v1/conversations/{key}/usage").status_code == 403
    assert client.post("/v1/conversations/demo/messages", json=ask("staff")).status_code == 403
    assert stored(settings) == [("demo", "api", "client")]


def test_an_open_api_refuses_to_serve_beyond_loopback(settings: Settings) -> None:
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        settings.api.host = host
        create_app(settings)
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.com"):
        settings.api.host = host
        with pytest.raises(UnsafeExposure, match="SUPPORTBOT_API__KEYS"):
            create_app(settings)
    settings.api.keys = {"shop": ApiKey(key=SecretStr(SHOP_KEY))}
    create_app(settings)  # with a key, any address


def test_serve_says_why_it_will_not_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUPPORTBOT_API__KEYS", raising=False)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0", "--port", "1"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "error: refusing to serve on 0.0.0.0: without SUPPORTBOT_API__KEYS the API "
        "is open to anyone, which is only allowed on a loopback address (e.g. 127.0.0.1)"
    ]


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"bot": {"key": SHOP_KEY, "prefix": "telegram:"}}, "only the Telegram bot"),
        ({"bot": {"key": SHOP_KEY, "prefix": "widget:x:"}}, "only the Telegram bot"),
        ({"bot": {"key": SHOP_KEY, "prefix": "tele"}}, "overlaps telegram:"),
        ({"bot": {"key": SHOP_KEY, "prefix": "a b"}}, "a key prefix matches"),
        ({"bot": {"key": "short", "prefix": "api:"}}, "at least 16 characters"),
        (
            {
                "a": {"key": SHOP_KEY, "prefix": "api:"},
                "b": {"key": SHOP_KEY + "x", "prefix": "api:b:"},
            },
            "overlap",
        ),
    ],
)
def test_key_settings_that_would_leak_are_refused(keys: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ApiSettings.model_validate({"keys": keys})


def test_a_short_staff_token_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Staff read every conversation: their tokens are as long as API keys at least."""
    monkeypatch.setenv("SUPPORTBOT_WIDGET__STAFF_TOKENS", '{"alice": "alice-token"}')
    with pytest.raises(ValidationError, match="staff token of 'alice' needs at least 16 char"):
        Settings(_env_file=None)
    monkeypatch.setenv("SUPPORTBOT_WIDGET__STAFF_TOKENS", '{"alice": "alice-token-0123"}')
    assert Settings(_env_file=None).widget.staff_tokens["alice"].get_secret_value() == (
        "alice-token-0123"
    )


def test_an_api_key_cannot_double_as_a_staff_token() -> None:
    with pytest.raises(ValidationError, match="also a staff token"):
        Settings.model_validate(
            {
                "api": {"keys": {"shop": {"key": SHOP_KEY}}},
                "widget": {"staff_tokens": {"alice": SHOP_KEY}},
            }
        )


def test_nothing_is_stored_for_a_refused_turn(keyed: TestClient, settings: Settings) -> None:
    keyed.post("/v1/conversations/telegram:1/messages", json=ask(), headers=SHOP)
    keyed.post("/v1/conversations/widget:alice:1/messages", json=ask())
    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        assert connection.execute(select(Message.id)).all() == []
    engine.dispose()


def test_an_open_api_answers_anonymous_callers_only_on_loopback(
    settings: Settings, sample_index: Path
) -> None:
    """Whatever the settings' host says: the address a request came in on is the one the
    server listens on (`uvicorn --factory --host 0.0.0.0` skips `supportbot serve`'s check)."""
    make_client(settings, sample_index)  # migrates the database
    app = create_app(settings)
    with TestClient(app, base_url="http://192.168.1.10:8000") as lan:
        refused = lan.post("/v1/conversations/demo/messages", json=ask())
        assert refused.status_code == 401
        assert refused.json()["detail"].startswith(
            "this request came in on 192.168.1.10: without SUPPORTBOT_API__KEYS"
        )
        assert lan.get("/v1/conversations/demo").status_code == 401
        assert stored(settings) == []
    with TestClient(app, base_url="http://[::1]:8000") as local:
        assert local.post("/v1/conversations/demo/messages", json=ask()).status_code == 200
