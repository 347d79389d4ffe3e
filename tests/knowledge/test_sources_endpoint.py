"""`supportbot serve`'s scheduled syncs, end to end: the running app syncs a source set in
SUPPORTBOT_KNOWLEDGE__SOURCES when it is due, answers from what it synced, and
`GET /v1/admin/kb/sources` shows the counts, the errors and the next time, to the admin
token and staff only."""

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.db import migrate
from app.settings import Settings
from tests.conftest import WarmClient
from tests.knowledge.help_center import REFUNDS_CHANGED, HelpCenter, help_pages

ADMIN = {"authorization": "Bearer admin-token-0123456789abcdef"}
STAFF = {"authorization": "Bearer alice-token-0123456789"}
SHOP = {"authorization": "Bearer shop-key-0123456789abcdef"}
SOURCES = "/v1/admin/kb/sources"


@pytest.fixture
def app_settings(
    help_center: HelpCenter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """The service configured as an operator would, through the environment."""
    source = {"location": help_center.url("/help/"), "every_hours": 1}
    for name, value in {
        "DB__URL": f"sqlite:///{tmp_path / 'supportbot.db'}",
        "KNOWLEDGE__QDRANT_PATH": str(tmp_path / "qdrant"),
        "KNOWLEDGE__SYNC_ALLOW_PRIVATE_ADDRESSES": "true",
        "KNOWLEDGE__SOURCES": json.dumps([source]),
        "ADMIN_TOKEN": ADMIN["authorization"][7:],
        "WIDGET__STAFF_TOKENS": json.dumps({"alice": STAFF["authorization"][7:]}),
        "API__KEYS": json.dumps({"shop": {"key": SHOP["authorization"][7:], "prefix": "api:"}}),
    }.items():
        monkeypatch.setenv(f"SUPPORTBOT_{name}", value)
    settings = Settings(_env_file=None)
    migrate.upgrade(settings.db.url)
    return settings


@pytest.fixture
def client(app_settings: Settings, help_center: HelpCenter) -> Iterator[TestClient]:
    help_pages(help_center)
    with WarmClient(create_app(app_settings)) as serving:
        yield serving


def first_sync(client: TestClient) -> dict[str, Any]:
    """The source once the app's own scheduler has synced it (it is due at start)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        [shown] = client.get(SOURCES, headers=ADMIN).json()["sources"]
        if shown["last_finished_at"]:
            return dict(shown)
        time.sleep(0.1)
    raise AssertionError("the scheduler never synced the source")


def refund_answer(client: TestClient, conversation: str) -> dict[str, Any]:
    turn = {"audience": "client", "author": "Ann", "text": "When does a refund arrive?"}
    answered = client.post(f"/v1/conversations/{conversation}/messages", json=turn, headers=SHOP)
    assert answered.status_code == 200, answered.text
    reply: dict[str, Any] = answered.json()
    return reply


def test_the_running_app_syncs_a_due_source_and_shows_how_it_went(
    client: TestClient, help_center: HelpCenter
) -> None:
    shown = first_sync(client)
    finished = datetime.fromisoformat(shown["last_finished_at"])
    assert shown == {
        "location": help_center.url("/help/"),
        "collection": "kb",
        "every_hours": 1.0,
        "running": False,
        "last_started_at": shown["last_started_at"],
        "last_finished_at": shown["last_finished_at"],
        "last_counts": {"added": 4, "changed": 0, "removed": 0, "unchanged": 0},
        "last_error": None,
        "next_due_at": (finished + timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
    }
    reply = refund_answer(client, "api:refunds-1")
    assert "five business days" in reply["text"]
    assert help_center.url("/help/refunds.html") in {c["url"] for c in reply["citations"]}

    # An hour later the page has changed: the next due sync takes the change in.
    help_center.pages["/help/refunds.html"] = (REFUNDS_CHANGED, "text/html")
    scheduler = client.app.state.source_scheduler  # type: ignore[attr-defined]
    later = datetime.now(UTC) + timedelta(hours=2)
    [synced] = client.portal.call(scheduler.run_due, later)  # type: ignore[union-attr]
    assert synced.error is None
    [shown] = client.get(SOURCES, headers=STAFF).json()["sources"]
    assert shown["last_counts"] == {"added": 0, "changed": 1, "removed": 0, "unchanged": 3}
    assert "two business days" in refund_answer(client, "api:refunds-2")["text"]

    # The site goes down: its error shows, the pages synced before still answer.
    help_center.statuses["/robots.txt"] = 503
    [failed] = client.portal.call(scheduler.run_due, later + timedelta(hours=2))  # type: ignore[union-attr]
    assert failed.counts is None
    [shown] = client.get(SOURCES, headers=ADMIN).json()["sources"]
    assert "robots.txt answered HTTP 503" in shown["last_error"]
    assert shown["last_counts"] == {"added": 0, "changed": 1, "removed": 0, "unchanged": 3}
    assert "two business days" in refund_answer(client, "api:refunds-3")["text"]


def test_the_sources_are_for_the_admin_token_and_staff(client: TestClient) -> None:
    assert client.get(SOURCES, headers=ADMIN).status_code == 200
    assert client.get(SOURCES, headers=STAFF).status_code == 200
    refused = client.get(SOURCES, headers=SHOP)
    assert refused.status_code == 403 and refused.json()["detail"]
    assert client.get(SOURCES).status_code == 401
    wrong = client.get(SOURCES, headers={"authorization": "Bearer not-a-known-token-at-all"})
    assert wrong.status_code == 401
