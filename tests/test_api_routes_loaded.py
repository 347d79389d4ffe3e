"""Start-up has FastAPI build every route's request handling, which it otherwise does when
the first request is matched against the route (the first turn paid ~70 ms of CPU)."""

import asyncio
from typing import Any

import pytest
from fastapi import routing

from app.api.main import create_app, load_routes
from app.settings import Settings


def test_after_load_routes_a_turn_request_builds_no_route(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    populate = routing._populate_api_route_state

    def counting(route: Any, path: str, *args: Any, **kwargs: Any) -> None:
        built.append(path)
        populate(route, path, *args, **kwargs)

    monkeypatch.setattr(routing, "_populate_api_route_state", counting)
    app = create_app(settings)
    asyncio.run(load_routes(app))
    assert "/v1/conversations/{key}/messages" in built
    loaded = len(built)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/conversations/api:one/messages",
        "root_path": "",
        "headers": [],
    }
    assert any(route.matches(scope)[0] == routing.Match.FULL for route in app.router.routes)
    assert len(built) == loaded
