"""Schemathesis against the app's own OpenAPI schema, in process (ASGI, no network): as an
anonymous client and as a staff member, no 5xx and every response as documented.

A bounded run for CI; `SUPPORTBOT_SCHEMA_EXAMPLES=30 pytest -s tests/test_api_schema.py` is
the longer run behind the README's figures (it prints the cases run per caller)."""

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from pydantic import SecretStr
from schemathesis.generation.modes import GenerationMode
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import positive_data_acceptance

from app.api.main import create_app
from app.db import migrate
from app.settings import DbSettings, KnowledgeSettings, Settings

STAFF_TOKEN = "schema-staff-token"
EXAMPLES = int(os.environ.get("SUPPORTBOT_SCHEMA_EXAMPLES", "6"))  # per operation and mode


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory, sample_index: Path) -> Iterator[Any]:
    folder = tmp_path_factory.mktemp("schema")
    app_settings = Settings(
        db=DbSettings(url=f"sqlite:///{folder / 'supportbot.db'}"),
        knowledge=KnowledgeSettings(qdrant_path=sample_index),
        _env_file=None,
    )
    app_settings.widget.staff_tokens = {"alice": SecretStr(STAFF_TOKEN)}
    app_settings.admin_token = SecretStr("schema-admin-token")
    # Generated cases share a few keys: the rate limits are not what is tested here.
    app_settings.api.conversation_rate = app_settings.api.caller_rate = "100000/minute"
    app_settings.api.caller_token_budget = "1000000000/day"
    migrate.upgrade(app_settings.db.url)
    yield schemathesis.openapi.from_asgi("/openapi.json", create_app(app_settings))
    asgi.shutdown_lifespans()  # closes the app's runtime


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
        turn = {"audience": "staff" if headers else "client", "author": "a", "text": "Invoices?"}
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
    ("headers", "known_key"),
    [({}, "api:demo"), ({"authorization": f"Bearer {STAFF_TOKEN}"}, "widget:alice:1")],
    ids=["anonymous", "staff"],
)
def test_the_api_answers_as_its_schema_says(
    api_schema: Any, headers: dict[str, str], known_key: str
) -> None:
    ran = run_every_operation(api_schema, headers, known_key)
    print(f"\n{sum(ran.values())} cases as {'staff' if headers else 'anonymous'}: {ran}")
    assert set(ran) >= {
        "POST /v1/conversations/{key}/messages",
        "GET /v1/conversations/{key}",
        "POST /v1/admin/kb/ingest",
    }
    assert all(count > 0 for count in ran.values()), ran
