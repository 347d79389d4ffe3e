"""Staff actions a page of another site could make a signed-in browser send: refused,
and nothing changes."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from app.settings import ApiKey, Settings
from tests.conftest import make_client
from tests.handoff.test_api import ALICE, CLIENT, open_handoff

EVIL = "https://evil.example"
FORM = {"content-type": "application/x-www-form-urlencoded"}


@pytest.fixture
def api(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    settings.widget.staff_tokens = {"alice": SecretStr("alice-api-token")}
    settings.widget.allowed_origins = ["https://crm.example.com"]
    settings.api.keys = {"acme": ApiKey(key=SecretStr("acme-client-key-0123456789"))}
    with make_client(settings, sample_index) as client:
        yield client


@pytest.mark.parametrize(
    "browser",
    [
        {"origin": EVIL},
        {"origin": EVIL, "sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "cross-site"},  # a browser that left Origin out
        {"origin": "null", "sec-fetch-site": "cross-site"},  # a sandboxed frame
        {"origin": "https://crm.example.com.evil.example", "sec-fetch-site": "same-site"},
    ],
)
def test_a_cross_site_claim_or_resolve_is_refused(api: TestClient, browser: dict[str, str]) -> None:
    handoff = open_handoff(api)
    for action in ("claim", "resolve"):
        forged = api.post(f"/v1/handoffs/{handoff}/{action}", headers={**ALICE, **FORM, **browser})
        assert forged.status_code == 403, forged.text
        assert "may not change anything" in forged.json()["detail"]
    turn = {"audience": "client", "author": "Ann", "text": "hi"}
    posted = api.post("/v1/conversations/api:1/messages", json=turn, headers={**CLIENT, **browser})
    assert posted.status_code == 403
    unchanged = api.get(f"/v1/handoffs/{handoff}", headers=ALICE).json()
    assert (unchanged["status"], unchanged["claimed_by"]) == ("open", None)
    assert len(api.get("/v1/conversations/api:shop:1", headers=ALICE).json()["messages"]) == 2


@pytest.mark.parametrize(
    "caller",
    [
        {},  # not a browser: a backend, curl
        {"sec-fetch-site": "same-origin", "origin": "http://testserver"},  # the queue page
        {"origin": "http://testserver"},  # a browser without Sec-Fetch-Site, same origin
        {"sec-fetch-site": "cross-site", "origin": "https://crm.example.com"},  # the embed
        {"sec-fetch-site": "none"},  # typed in
    ],
)
def test_own_pages_allowed_origins_and_non_browsers_may(
    api: TestClient, caller: dict[str, str]
) -> None:
    handoff = open_handoff(api)
    claimed = api.post(f"/v1/handoffs/{handoff}/claim", headers={**ALICE, **caller})
    assert claimed.status_code == 200, claimed.text
    assert claimed.json()["claimed_by"] == "alice"
