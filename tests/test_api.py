"""The HTTP API over the real runtime: SQLite, local Qdrant with the sample knowledge base,
the offline model."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr
from sqlalchemy import create_engine, func, select
from sqlalchemy.orm import QueryableAttribute

from app.api.main import create_app
from app.db import migrate
from app.db.engine import sync_url
from app.db.models import LLMCall, Message
from app.settings import LLMSettings, Settings
from tests.conftest import SAMPLE_KB, make_client, wait_until_warm


def count(settings: Settings, column: QueryableAttribute[Any]) -> int:
    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        value = connection.scalar(select(func.count(column)))
    engine.dispose()
    return int(value or 0)


def test_a_turn_answers_from_the_sample_kb_and_is_stored(
    client: TestClient, settings: Settings
) -> None:
    response = client.post(
        "/v1/conversations/demo/messages",
        json={"audience": "client", "author": "Ann", "text": "How do I create an invoice?"},
    )
    assert response.status_code == 200, response.text
    reply = response.json()
    assert reply["turn"] == 1 and reply["profile"] == "client"
    assert "Sales → Invoices → New invoice" in reply["text"]
    cited = next(c for c in reply["citations"] if c["source"] == "en/create-invoice.md")
    assert cited["title"] == "Creating and sending an invoice"
    assert cited["heading"] and len(cited["excerpt"]) <= 301
    assert "New invoice" in cited["excerpt"]
    assert reply["usage"]["llm_calls"] == 2 and reply["usage"]["input_tokens"] > 0

    history = client.get("/v1/conversations/demo").json()  # what was said, to a client
    assert [(m["role"], m["author"]) for m in history["messages"]] == [
        ("user", "Ann"),
        ("assistant", None),
    ]
    assert history["messages"][-1]["content"] == reply["text"]
    assert count(settings, Message.id) == 4  # the search's call and result too
    assert count(settings, LLMCall.id) == 2


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"audience": "client", "author": "Ann", "text": ""}, "the message is empty"),
        (
            {"audience": "client", "author": "Ann", "text": "a" * 8193},
            "the message has 8193 characters; the limit is 8192",
        ),
        (
            {"audience": "vip", "author": "Ann", "text": "hello"},
            "audience: Input should be 'staff' or 'client'",
        ),
        ({"audience": "client", "text": "hello"}, "author: Field required"),
        ("{not json", "JSON decode error"),
    ],
)
def test_bad_input_is_a_clear_422_and_stores_nothing(
    client: TestClient, settings: Settings, body: object, detail: str
) -> None:
    if isinstance(body, str):
        response = client.post(
            "/v1/conversations/demo/messages",
            content=body,
            headers={"content-type": "application/json"},
        )
    else:
        response = client.post("/v1/conversations/demo/messages", json=body)
    assert response.status_code == 422
    assert detail in response.json()["detail"]
    assert count(settings, Message.id) == 0
    assert client.get("/v1/conversations/demo").status_code == 404


def test_a_failing_model_gives_a_502_and_keeps_the_message(
    settings: Settings, sample_index: Path
) -> None:
    # An OpenAI-compatible endpoint on a closed local port: every call fails at once.
    settings.llm = LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="k")
    with make_client(settings, sample_index) as client:
        response = client.post(
            "/v1/conversations/demo/messages",
            json={"audience": "client", "author": "Jo", "text": "How do I create an invoice?"},
        )
        assert response.status_code == 502
        assert "your message was kept" in response.json()["detail"]
        history = client.get("/v1/conversations/demo").json()
    assert [m["content"] for m in history["messages"]] == ["How do I create an invoice?"]


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {
        "ready": True,
        "database": True,
        "vector_store": True,
        "warmed_up": True,
        "down": [],
    }


def test_openapi_documents_the_turn_with_examples(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert "/v1/conversations/{key}/messages" in schema["paths"]
    assert schema["components"]["schemas"]["MessageIn"]["examples"]


def metric(client: TestClient, name: str, **labels: str) -> float:
    """One sample of the /metrics exposition (0 when absent)."""
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


def test_usage_is_reported_per_conversation_and_in_metrics(
    settings: Settings, sample_index: Path
) -> None:
    # A block cache (vLLM-style, 16 tokens) caches even this short conversation's prefix.
    settings.observability.simulator_rules = "block16"
    with make_client(settings, sample_index) as client:
        check_usage_reports(client)


def check_usage_reports(client: TestClient) -> None:
    labels = {"profile": "client", "purpose": "agent", "model": "offline"}
    before = {
        name: metric(client, name, **labels)
        for name in (
            "supportbot_llm_calls_total",
            "supportbot_llm_input_tokens_total",
            "supportbot_llm_cached_input_tokens_total",
            "supportbot_llm_cost_usd_total",
        )
    }
    for text in ("How do I create an invoice?", "And how do I record a payment?"):
        client.post(
            "/v1/conversations/usage-demo/messages",
            json={"audience": "client", "author": "Ann", "text": text},
        )

    usage = client.get("/v1/conversations/usage-demo/usage").json()
    agent = usage["by_purpose"]["agent"]
    assert agent["llm_calls"] == 4
    assert 0 < agent["cached_tokens"] < agent["input_tokens"]  # simulated: turn 2 reuses turn 1
    assert agent["cached_share"] == pytest.approx(agent["cached_tokens"] / agent["input_tokens"])
    assert agent["cost_usd"] > 0  # the offline model is priced as a real one

    after = {name: metric(client, name, **labels) for name in before}
    assert after["supportbot_llm_calls_total"] - before["supportbot_llm_calls_total"] == 4
    assert (
        after["supportbot_llm_input_tokens_total"] - before["supportbot_llm_input_tokens_total"]
        == agent["input_tokens"]
    )
    assert (
        after["supportbot_llm_cached_input_tokens_total"]
        > before["supportbot_llm_cached_input_tokens_total"]
    )
    assert after["supportbot_llm_cost_usd_total"] > before["supportbot_llm_cost_usd_total"]
    assert metric(client, "supportbot_turn_duration_seconds_count", profile="client") >= 2
    assert client.get("/v1/conversations/nobody/usage").status_code == 404


def test_the_admin_endpoint_is_mounted_and_reingest_is_a_no_op(
    settings: Settings, sample_index: Path
) -> None:
    settings.admin_token = SecretStr("admin-secret")
    with make_client(settings, sample_index) as client:
        body = {"path": str(SAMPLE_KB)}
        assert client.post("/v1/admin/kb/ingest", json=body).status_code == 401
        response = client.post(
            "/v1/admin/kb/ingest", json=body, headers={"authorization": "Bearer admin-secret"}
        )
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["documents_added"] == report["documents_updated"] == 0
    assert report["documents_unchanged"] == 24


def test_prices_and_metrics_follow_the_apps_own_settings(
    settings: Settings, sample_index: Path
) -> None:
    """The service's settings decide, not the process environment's."""
    settings.observability.metrics_enabled = False
    settings.observability.offline_priced_as = "claude-haiku-4-5"
    with make_client(settings, sample_index) as client:

        def counters() -> list[float]:
            return [
                metric(client, "supportbot_llm_calls_total", profile="client", model="offline"),
                metric(client, "supportbot_turn_duration_seconds_count", profile="client"),
            ]

        before = counters()
        client.post(
            "/v1/conversations/priced/messages",
            json={"audience": "client", "author": "Ann", "text": "How do I create an invoice?"},
        )
        agent = client.get("/v1/conversations/priced/usage").json()["by_purpose"]["agent"]
        assert counters() == before

    # claude-haiku-4-5: $1 input, $5 output per 1M tokens; nothing is cached in this short turn.
    expected = (agent["input_tokens"] * 1.0 + agent["output_tokens"] * 5.0) / 1e6
    assert agent["cost_usd"] == pytest.approx(expected)


class _StalledQdrant(BaseHTTPRequestHandler):
    """A Qdrant server that lists the `kb` collection at once but answers a search only
    once `released` is set (then with an error)."""

    released = threading.Event()

    def _reply(self, status: int, result: object) -> None:
        body = json.dumps({"result": result, "status": "ok", "time": 0}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/collections/kb/exists"):
            self._reply(200, {"exists": True})
        elif self.path.startswith("/collections"):
            self._reply(200, {"collections": [{"name": "kb"}]})
        else:
            self._reply(404, None)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.released.wait(60)
        self._reply(500, None)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_healthz_answers_while_the_first_turns_needs_load_and_readyz_waits_for_them(
    settings: Settings,
) -> None:
    """The start-up search is held by the store: the app is up (/healthz) but not ready."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StalledQdrant)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.knowledge.qdrant_url = f"http://127.0.0.1:{server.server_address[1]}"
    migrate.upgrade(settings.db.url)
    try:
        with TestClient(create_app(settings)) as client:
            alive = client.get("/healthz")
            loading = client.get("/readyz")
            _StalledQdrant.released.set()  # the search fails: logged, the warm-up ends
            wait_until_warm(client, 60)
            ready = client.get("/readyz")
            documented = client.get("/openapi.json").json()["paths"]["/readyz"]["get"]
    finally:
        _StalledQdrant.released.set()
        server.shutdown()
        server.server_close()
    assert alive.status_code == 200
    assert loading.status_code == 503 and loading.json()["down"] == ["warmed_up"]
    assert ready.status_code == 200
    assert {"200", "503"} <= set(documented["responses"])  # both, as schema checkers read
