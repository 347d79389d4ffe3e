"""Authorization before validation: every `/v1` route a client may not use answers a client
(an API key, an anonymous caller) 403 or 401 whatever its parameters, never a 422 that
tells it how to form the request. The routes are walked from the app's OpenAPI document,
so a route added later is checked too; the client routes are listed here on purpose."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from app.settings import ApiKey, Settings
from tests.conftest import make_client

SHOP = {"authorization": "Bearer shop-key-0123456789abcdef"}
ALICE = {"authorization": "Bearer alice-token-0123456789"}
ADMIN = "admin-token-0123456789abcdef"

# What a client may call (its own conversations, its people's memory, its tenant's
# insights); every other /v1 route is for staff (or the admin token).
CLIENT_ROUTES = {
    ("post", "/v1/conversations/{key}/messages"),
    ("post", "/v1/conversations/{key}/messages/stream"),
    ("post", "/v1/conversations/{key}/turns/{turn}/feedback"),
    ("get", "/v1/conversations/{key}/usage"),
    ("get", "/v1/conversations/{key}"),
    ("get", "/v1/insights/gaps"),
    ("get", "/v1/insights/outcomes"),
    ("get", "/v1/people/{person}/memory"),
    ("delete", "/v1/people/{person}/memory"),
    ("delete", "/v1/people/{person}/memory/{item}"),
}
BAD = "bad!"  # no key, id, number, status or period


@pytest.fixture
def keyed(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    settings.api.keys = {"shop": ApiKey(key=SecretStr(SHOP["authorization"][7:]), prefix="api:")}
    settings.widget.staff_tokens = {"alice": SecretStr(ALICE["authorization"][7:])}
    settings.admin_token = SecretStr(ADMIN)
    with make_client(settings, sample_index) as client:
        yield client


def staff_routes(client: TestClient) -> list[tuple[str, str, dict[str, Any]]]:
    operations = client.get("/openapi.json").json()["paths"]
    return [
        (method, path, operation)
        for path, methods in operations.items()
        if path.startswith("/v1/")
        for method, operation in methods.items()
        if (method, path) not in CLIENT_ROUTES
    ]


def badly(
    client: TestClient, method: str, path: str, operation: dict[str, Any], **request: Any
) -> httpx2.Response:
    """The route called with every path and query parameter invalid and, for a route that
    takes a body, a body of the wrong shape."""
    parameters = operation.get("parameters", [])
    for parameter in parameters:
        if parameter["in"] == "path":
            path = path.replace("{" + parameter["name"] + "}", BAD)
    query = {p["name"]: BAD for p in parameters if p["in"] == "query"}
    return client.request(method, path, params=query, **request)


def test_the_walk_finds_every_staff_route(keyed: TestClient) -> None:
    found = {(method, path) for method, path, _ in staff_routes(keyed)}
    assert {
        ("get", "/v1/handoffs"),
        ("post", "/v1/handoffs/{handoff_id}/messages"),
        ("put", "/v1/conversations/{key}/profile"),
        ("get", "/v1/conversations/{key}/memory"),
        ("get", "/v1/widget/conversations"),
        ("post", "/v1/admin/kb/ingest"),
        ("get", "/v1/admin/kb/sources"),
    } <= found
    assert not found & CLIENT_ROUTES


@pytest.mark.parametrize(
    "body",
    [{"json": {"text": ["not", "text"], "profile": 7, "path": None}}, {"content": b"{not json"}],
    ids=["wrong-fields", "no-json"],
)
def test_an_api_key_is_refused_by_every_staff_route_before_its_parameters_are_read(
    keyed: TestClient, body: dict[str, Any]
) -> None:
    answers = {}
    for method, path, operation in staff_routes(keyed):
        headers = {**SHOP, "content-type": "application/json"}
        sent = body if "requestBody" in operation else {}
        answers[method, path] = badly(keyed, method, path, operation, headers=headers, **sent)
    assert {route: r.status_code for route, r in answers.items() if r.status_code != 403} == {}
    assert all(
        "detail" in r.json() and isinstance(r.json()["detail"], str) for r in answers.values()
    )


def test_staff_with_the_same_parameters_are_told_what_is_wrong(keyed: TestClient) -> None:
    """The negative: the same calls from staff reach validation, a 422 with its reason (the
    admin route wants its own token: 403)."""
    for method, path, operation in staff_routes(keyed):
        if path.startswith("/v1/admin/"):
            continue
        if not operation.get("parameters") and "requestBody" not in operation:
            continue  # nothing to get wrong
        sent = {"content": b"{not json"} if "requestBody" in operation else {}
        answer = badly(keyed, method, path, operation, headers=ALICE, **sent)
        assert answer.status_code == 422, (method, path, answer.text)


def test_an_anonymous_caller_of_an_open_api_is_refused_before_validation(
    client: TestClient,
) -> None:
    for method, path, operation in [
        *staff_routes(client),
        ("get", "/v1/insights/gaps", {"parameters": [{"in": "query", "name": "since"}]}),
        ("get", "/v1/insights/outcomes", {"parameters": [{"in": "query", "name": "since"}]}),
    ]:
        sent = {"content": b"{not json"} if "requestBody" in operation else {}
        answer = badly(client, method, path, operation, **sent)
        assert answer.status_code in (401, 403, 503), (method, path, answer.text)
