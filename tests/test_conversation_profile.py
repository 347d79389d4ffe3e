"""A conversation's memory profile, set by staff over HTTP (`PUT /v1/conversations/{key}/
profile`) or from a shell (`supportbot conversations set-profile`); the next turn runs
under it."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from typer.testing import CliRunner

from app.cli import cli
from app.settings import ApiKey, Settings, get_settings
from tests.conftest import make_client

ALICE = {"authorization": "Bearer alice-token-0123456789"}
SHOP = {"authorization": "Bearer shop-key-0123456789abcdef"}
KEY = "api:shop:42"
TURN = {"audience": "client", "author": "Ann", "text": "How do I create an invoice?"}


@pytest.fixture
def api(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    settings.api.keys = {
        "shop": ApiKey(key=SecretStr(SHOP["authorization"][7:]), prefix="api:shop:")
    }
    settings.widget.staff_tokens = {"alice": SecretStr(ALICE["authorization"][7:])}
    with make_client(settings, sample_index) as client:
        yield client


def profile_of_next_turn(client: TestClient) -> str:
    reply = client.post(f"/v1/conversations/{KEY}/messages", json=TURN, headers=SHOP)
    assert reply.status_code == 200, reply.text
    return str(reply.json()["profile"])


def test_staff_give_a_conversation_another_profile(api: TestClient) -> None:
    assert profile_of_next_turn(api) == "client"
    put = api.put(f"/v1/conversations/{KEY}/profile", json={"profile": "staff"}, headers=ALICE)
    assert put.status_code == 200, put.text
    assert put.json() == {"key": KEY, "profile": "staff"}
    assert profile_of_next_turn(api) == "staff"
    shown = api.get(f"/v1/conversations/{KEY}", headers=ALICE).json()
    assert shown["profile"] == "staff"


def test_only_staff_set_a_profile_and_bad_input_changes_nothing(api: TestClient) -> None:
    profile_of_next_turn(api)
    path = f"/v1/conversations/{KEY}/profile"
    assert api.put(path, json={"profile": "staff"}, headers=SHOP).status_code == 403
    assert api.put(path, json={"profile": "staff"}).status_code == 401
    unknown = api.put(path, json={"profile": "fancy"}, headers=ALICE)
    assert unknown.status_code == 422
    assert "unknown memory profile 'fancy'" in unknown.json()["detail"]
    assert api.put(path, json={"profile": ""}, headers=ALICE).status_code == 422
    missing = api.put(
        "/v1/conversations/api:shop:nobody/profile", json={"profile": "staff"}, headers=ALICE
    )
    assert missing.status_code == 404
    assert profile_of_next_turn(api) == "client"


def test_the_command_line_sets_it_too(
    api: TestClient, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile_of_next_turn(api)
    monkeypatch.setenv("SUPPORTBOT_DB__URL", settings.db.url)
    get_settings.cache_clear()
    try:
        runner = CliRunner()
        done = runner.invoke(cli, ["conversations", "set-profile", KEY, "staff"])
        assert done.exit_code == 0, done.output
        assert f"{KEY}: memory profile staff" in done.output
        unknown = runner.invoke(cli, ["conversations", "set-profile", KEY, "fancy"])
        assert unknown.exit_code == 1 and "unknown memory profile 'fancy'" in unknown.output
        missing = runner.invoke(cli, ["conversations", "set-profile", "api:none", "staff"])
        assert missing.exit_code == 1 and "no conversation 'api:none'" in missing.output
    finally:
        get_settings.cache_clear()
    assert profile_of_next_turn(api) == "staff"
