"""The app over a copy of the sample knowledge base of the test's own (answers are written
into it), with staff tokens for alice and bob and an API key for a client."""

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from app.settings import ApiKey, Settings
from tests.conftest import make_client

ALICE = {"authorization": "Bearer alice-api-token"}
CLIENT = {"authorization": "Bearer acme-client-key-0123456789"}
PAYPAL = {
    "question": "Can I pay my Ledgerly subscription with PayPal?",
    "variants": ["Do you accept PayPal?", "Is PayPal a payment option for the plan?"],
    "answer": "Yes. Open **Settings → Billing → Payment method**, choose *PayPal* and sign "
    "in to your PayPal account. The next invoice of your plan is charged there.",
}


@pytest.fixture
def own_index(sample_index: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "own-qdrant"
    shutil.copytree(sample_index, copy)
    return copy


@pytest.fixture
def staff_settings(settings: Settings) -> Settings:
    settings.widget.staff_tokens = {
        "alice": SecretStr("alice-api-token"),
        "bob": SecretStr("bob-api-token"),
    }
    settings.api.keys = {"acme": ApiKey(key=SecretStr("acme-client-key-0123456789"))}
    return settings


@pytest.fixture
def api(staff_settings: Settings, own_index: Path) -> Iterator[TestClient]:
    with make_client(staff_settings, own_index) as client:
        yield client


def ask(api: TestClient, key: str, text: str) -> dict:
    turn = {"audience": "client", "author": "Ann", "text": text}
    reply = api.post(f"/v1/conversations/api:shop:{key}/messages", json=turn, headers=CLIENT)
    assert reply.status_code == 200, reply.text
    body: dict = reply.json()
    return body
