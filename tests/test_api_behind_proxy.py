"""An open API (no keys) behind a proxy: every caller arrives from the proxy's loopback
address, so start-up refuses trusted proxies, and a request with forwarding headers reaches
only the conversations it started, by the token its first reply gave."""

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from typer.testing import CliRunner

from app.api.exposure import UnsafeExposure, exposure_problem
from app.api.main import create_app
from app.bench.scripted_llm import Fault, ScriptedLLM
from app.cli import cli
from app.settings import ApiKey, Settings, WidgetSettings, get_settings
from tests.conftest import make_client
from tests.test_api_access import SHOP_KEY, ask, stored
from tests.test_model_faults import use_scripted
from tests.test_widget_api import events

TOKEN = "X-Conversation-Token"
# What a proxy on the same host adds: each alone marks a request as passed on.
VIA_PROXY = [
    {"X-Forwarded-For": "203.0.113.7"},
    {"X-Real-IP": "203.0.113.8"},
    {"Forwarded": "for=203.0.113.9;proto=https"},
]
REFUSED = "is not one this caller started: an anonymous caller behind a proxy reaches only"


@pytest.fixture
def local(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    """The open API as `make run` serves it, reached on 127.0.0.1: by a local client (no
    forwarding headers) or through a proxy on the same host (with them)."""
    settings.knowledge.qdrant_path = sample_index
    client = make_client(settings, sample_index)
    client.base_url = client.base_url.copy_with(host="127.0.0.1", port=8000)
    with client:
        yield client


def refused(response: httpx2.Response, key: str) -> bool:
    """The one refusal, whether or not the conversation exists."""
    return response.status_code == 403 and response.json()["detail"].startswith(
        f"conversation {key!r} {REFUSED}"
    )


def turns_and_ratings(client: TestClient, key: str) -> tuple[set[int], list[str]]:
    """As the local client reads conversation `key`: its turns and the answers' ratings."""
    messages = client.get(f"/v1/conversations/{key}").json()["messages"]
    ratings = [m["feedback"]["rating"] for m in messages if m.get("feedback")]
    return {m["turn"] for m in messages}, ratings


def test_a_caller_behind_the_proxy_reaches_only_the_conversations_it_started(
    local: TestClient, settings: Settings
) -> None:
    started_locally = local.post("/v1/conversations/demo/messages", json=ask())
    assert started_locally.status_code == 200, started_locally.text
    assert TOKEN not in started_locally.headers
    assert started_locally.json()["conversation_token"] is None
    for proxy in VIA_PROXY:
        # The local conversation, by its key: nothing read, nothing written.
        assert refused(local.get("/v1/conversations/demo", headers=proxy), "demo")
        assert refused(local.get("/v1/conversations/demo/usage", headers=proxy), "demo")
        rated = local.post(
            "/v1/conversations/demo/turns/1/feedback", json={"rating": "down"}, headers=proxy
        )
        assert refused(rated, "demo")
        posted = local.post("/v1/conversations/demo/messages", json=ask(), headers=proxy)
        assert refused(posted, "demo") and TOKEN not in posted.headers
        streamed = local.post("/v1/conversations/demo/messages/stream", json=ask(), headers=proxy)
        assert refused(streamed, "demo")
        # A key nobody used answers the same: a refusal tells nothing about existence.
        assert refused(local.get("/v1/conversations/nobody", headers=proxy), "nobody")
    assert turns_and_ratings(local, "demo") == ({1}, [])

    # Through the proxy, a new conversation: its first reply gives the token.
    proxy = VIA_PROXY[0]
    first = local.post("/v1/conversations/mine/messages", json=ask(), headers=proxy)
    assert first.status_code == 200, first.text
    token = first.headers[TOKEN]
    assert len(token) >= 32 and first.json()["conversation_token"] == token
    own = {**proxy, TOKEN: token}
    assert local.get("/v1/conversations/mine", headers=own).status_code == 200
    assert local.get("/v1/conversations/mine/usage", headers=own).status_code == 200
    rated = local.post(
        "/v1/conversations/mine/turns/1/feedback", json={"rating": "up"}, headers=own
    )
    assert rated.status_code == 201
    second = local.post("/v1/conversations/mine/messages", json=ask(), headers=own)
    assert second.status_code == 200 and second.json()["conversation_token"] is None
    assert TOKEN not in second.headers
    # Without the token, with another one, or with another conversation's: refused.
    other = local.post("/v1/conversations/other/messages", json=ask(), headers=VIA_PROXY[1])
    for headers in (
        proxy,
        {**proxy, TOKEN: token[:-1]},
        {**VIA_PROXY[2], TOKEN: other.headers[TOKEN]},
    ):
        assert refused(local.get("/v1/conversations/mine", headers=headers), "mine")
        posted = local.post("/v1/conversations/mine/messages", json=ask(), headers=headers)
        assert refused(posted, "mine")
    # A token opens only its own conversation.
    assert refused(local.get("/v1/conversations/other", headers=own), "other")
    # The local client (the developer at the machine) still reads every conversation.
    assert turns_and_ratings(local, "mine") == ({1, 2}, ["up"])
    assert stored(settings) == [
        ("demo", "api", "client"),
        ("mine", "api", "client"),
        ("other", "api", "client"),
    ]


def test_a_stream_started_through_the_proxy_gives_the_token(local: TestClient) -> None:
    proxy = VIA_PROXY[1]
    response = local.post("/v1/conversations/streamed/messages/stream", json=ask(), headers=proxy)
    assert response.status_code == 200, response.text
    token = response.headers[TOKEN]
    (_, done), *_ = [e for e in events(response.text) if e[0] == "done"]
    assert done["conversation_token"] == token
    own = {**proxy, TOKEN: token}
    assert local.get("/v1/conversations/streamed", headers=own).status_code == 200
    assert refused(local.get("/v1/conversations/streamed", headers=proxy), "streamed")


def test_a_refused_first_turn_leaves_the_key_free(local: TestClient, settings: Settings) -> None:
    proxy = VIA_PROXY[0]
    as_staff = local.post("/v1/conversations/fresh/messages", json=ask("staff"), headers=proxy)
    assert as_staff.status_code == 403 and TOKEN not in as_staff.headers
    too_long = {**ask(), "text": "x" * (settings.chat.max_message_chars + 1)}
    refused = local.post("/v1/conversations/fresh/messages", json=too_long, headers=proxy)
    assert refused.status_code == 422 and TOKEN not in refused.headers
    assert stored(settings) == []
    started = local.post("/v1/conversations/fresh/messages", json=ask(), headers=proxy)
    assert started.status_code == 200 and started.headers[TOKEN]


def test_a_failed_first_turn_still_gives_the_token_of_the_kept_message(
    settings: Settings, sample_index: Path
) -> None:
    scripted = ScriptedLLM()
    with scripted:
        use_scripted(settings, scripted, max_retries=1)
        scripted.add(Fault.UNAVAILABLE, Fault.UNAVAILABLE)
        with make_client(settings, sample_index) as client:
            proxy = VIA_PROXY[0]
            failed = client.post("/v1/conversations/kept/messages", json=ask(), headers=proxy)
            assert failed.status_code == 502 and "was kept" in failed.json()["detail"]
            own = {**proxy, TOKEN: failed.headers[TOKEN]}
            messages = client.get("/v1/conversations/kept", headers=own).json()["messages"]
    assert [m["role"] for m in messages] == ["user"]


def test_an_open_api_refuses_to_start_behind_trusted_proxies(settings: Settings) -> None:
    assert exposure_problem(settings, {}) is None  # `make run`: loopback, no proxy
    settings.widget.trusted_proxies = WidgetSettings(trusted_proxies=["127.0.0.1"]).trusted_proxies
    with pytest.raises(UnsafeExposure) as raised:
        create_app(settings)
    assert str(raised.value) == (
        "refusing to serve behind the proxies of SUPPORTBOT_WIDGET__TRUSTED_PROXIES: without "
        "SUPPORTBOT_API__KEYS the API would be open to anyone the proxy lets in; set "
        "SUPPORTBOT_API__KEYS"
    )
    settings.widget.trusted_proxies = []
    for variable in ("FORWARDED_ALLOW_IPS", "UVICORN_FORWARDED_ALLOW_IPS"):
        problem = exposure_problem(settings, {variable: "127.0.0.1"})
        assert problem is not None and f"proxies of {variable}: without" in problem
    assert exposure_problem(settings, {"FORWARDED_ALLOW_IPS": ""}) is None
    settings.api.keys = {"shop": ApiKey(key=SecretStr(SHOP_KEY))}
    settings.widget.trusted_proxies = WidgetSettings(trusted_proxies=["127.0.0.1"]).trusted_proxies
    assert exposure_problem(settings, {"FORWARDED_ALLOW_IPS": "*"}) is None  # keys: any proxy


def test_serve_says_in_one_line_why_it_will_not_start_behind_a_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SUPPORTBOT_API__KEYS", raising=False)
    monkeypatch.setenv("SUPPORTBOT_WIDGET__TRUSTED_PROXIES", '["127.0.0.1"]')
    get_settings.cache_clear()
    # A port already taken: were the refusal gone, serving would fail there, not hang.
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        try:
            result = CliRunner().invoke(cli, ["serve", "--host", "127.0.0.1", "--port", port])
        finally:
            get_settings.cache_clear()
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "error: refusing to serve behind the proxies of SUPPORTBOT_WIDGET__TRUSTED_PROXIES: "
        "without SUPPORTBOT_API__KEYS the API would be open to anyone the proxy lets in; set "
        "SUPPORTBOT_API__KEYS"
    ]
