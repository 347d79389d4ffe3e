"""Schemathesis against the app's own OpenAPI schema, in process (ASGI, no network): as an
anonymous client, a staff member (by token, and by the SSO proxy's header) and a backend
(by API key), no 5xx and every response as documented.

A bounded run for CI; `SUPPORTBOT_SCHEMA_EXAMPLES=30 pytest -s tests/test_api_schema.py` is
the longer run behind the README's figures (it prints the cases run per caller)."""

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from pydantic import SecretStr
from schemathesis.generation.modes import GenerationMode
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import positive_data_acceptance
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.main import create_app
from app.db import migrate
from app.settings import ApiKey, DbSettings, KnowledgeSettings, Settings, WidgetSettings
from tests.conftest import wait_until_warm

STAFF_TOKEN = "schema-staff-token"
SHOP_KEY = "schema-shop-key-0123456789"
PROXY = "10.0.0.2"
PROXY_HEADER = "X-Forwarded-User"
EXAMPLES = int(os.environ.get("SUPPORTBOT_SCHEMA_EXAMPLES", "6"))  # per operation and mode


def schema_of(folder: Path, sample_index: Path, configure: Callable[[Settings], None]) -> Any:
    # A copy of the sample index: generated cases save team answers into it.
    shutil.copytree(sample_index, folder / "qdrant")
    app_settings = Settings(
        db=DbSettings(url=f"sqlite:///{folder / 'supportbot.db'}"),
        knowledge=KnowledgeSettings(qdrant_path=folder / "qdrant"),
        _env_file=None,
    )
    app_settings.widget.staff_tokens = {"alice": SecretStr(STAFF_TOKEN)}
    app_settings.admin_token = SecretStr("schema-admin-token")
    # Generated cases share a few keys: the rate limits are not what is tested here.
    app_settings.api.conversation_rate = app_settings.api.caller_rate = "100000/minute"
    app_settings.api.caller_token_budget = "1000000000/day"
    configure(app_settings)
    migrate.upgrade(app_settings.db.url)
    return schemathesis.openapi.from_asgi("/openapi.json", from_the_proxy(create_app(app_settings)))


def from_the_proxy(app: ASGIApp) -> ASGIApp:
    """Every connection as if from the SSO proxy's address (the test client has none)."""

    async def connected(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope = {**scope, "client": (PROXY, 40000)}
        await app(scope, receive, send)

    return connected


@pytest.fixture(scope="module")
def open_api(tmp_path_factory: pytest.TempPathFactory, sample_index: Path) -> Iterator[Any]:
    """No API keys: anonymous clients and staff."""
    yield schema_of(tmp_path_factory.mktemp("open"), sample_index, lambda _: None)
    asgi.shutdown_lifespans()  # closes the apps' runtimes


def with_keys_and_the_proxy(app_settings: Settings) -> None:
    app_settings.api.keys = {"shop": ApiKey(key=SecretStr(SHOP_KEY), prefix="api:shop:")}
    app_settings.widget.trusted_user_header = PROXY_HEADER
    app_settings.widget.trusted_proxies = WidgetSettings(trusted_proxies=[PROXY]).trusted_proxies


@pytest.fixture(scope="module")
def keyed_api(tmp_path_factory: pytest.TempPathFactory, sample_index: Path) -> Iterator[Any]:
    """API keys and the SSO proxy's header: a backend, and staff signed in by the proxy."""
    yield schema_of(tmp_path_factory.mktemp("keyed"), sample_index, with_keys_and_the_proxy)
    asgi.shutdown_lifespans()


def strategies(operation: Any, known_key: str) -> list[Any]:
    """Valid and invalid data for the operation, and valid data for a conversation that
    exists (random keys mostly find none, so its 200s would go untested)."""
    found = [operation.as_strategy()]
    if any(operation.iter_parameters()) or list(operation.body):
        found.append(operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))
    if "{key}" in operation.path:
        known = {"key": known_key, "turn": 1} if "{turn}" in operation.path else {"key": known_key}
        found.append(operation.as_strategy(path_parameters=known))
    return found


def run_every_operation(schema: Any, headers: dict[str, str], known_key: str) -> dict[str, int]:
    """Cases run per operation; raises on the first failure."""
    with asgi.get_client(schema.app) as client:
        wait_until_warm(client)  # a 503 from /readyz before is documented
        audience = "staff" if known_key.startswith("widget:") else "client"
        turn = {"audience": audience, "author": "a", "text": "Invoices?"}
        posted = client.post(f"/v1/conversations/{known_key}/messages", json=turn, headers=headers)
        assert posted.status_code == 200, posted.text
    ran: dict[str, int] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        ran[operation.label] = 0
        for strategy in strategies(operation, known_key):

            @given(case=strategy)
            @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
            def run(case: Any) -> None:
                ran[operation.label] += 1  # noqa: B023 (run is called right here)
                # Refusing text with nothing visible is a rule no JSON schema states: that
                # refusal (a 422 for schema-valid input) is by design, so that check is out.
                case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])

            run()
    return ran


@pytest.mark.parametrize(
    ("api", "headers", "known_key"),
    [
        ("open_api", {}, "api:demo"),
        ("open_api", {"authorization": f"Bearer {STAFF_TOKEN}"}, "widget:alice:1"),
        ("keyed_api", {"authorization": f"Bearer {SHOP_KEY}"}, "api:shop:demo"),
        ("keyed_api", {PROXY_HEADER: "Bob Smith"}, "widget:bob+20smith:1"),
    ],
    ids=["anonymous", "staff", "api-key", "sso-proxy"],
)
def test_the_api_answers_as_its_schema_says(
    request: pytest.FixtureRequest, api: str, headers: dict[str, str], known_key: str
) -> None:
    api_schema = request.getfixturevalue(api)
    ran = run_every_operation(api_schema, headers, known_key)
    caller = request.node.callspec.id
    print(f"\n{sum(ran.values())} cases as {caller}, 0 failures: {ran}")
    assert set(ran) >= {
        "POST /v1/conversations/{key}/messages",
        "GET /v1/conversations/{key}",
        "POST /v1/admin/kb/ingest",
    }
    assert all(count > 0 for count in ran.values()), ran
