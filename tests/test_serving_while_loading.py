"""The port answers while the app loads (app/api/starting.py): /healthz at once, /readyz
"not yet", every other request once the app is loaded and started; a failed load or
start-up answers 503 and stops the server with an error."""

import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from app.api.starting import FAILED, ASGIApp, LoadingApp, serve_while_loading
from tests.browser.test_widget import free_port

Events = list[str]


def service(events: Events, *, fail_startup: bool = False) -> FastAPI:
    """A stand-in for the service's app that records its lifespan."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        events.append("startup")
        if fail_startup:
            raise RuntimeError("no database")
        yield
        events.append("shutdown")

    app = FastAPI(lifespan=lifespan)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "loaded"}

    @app.post("/echo")
    async def echo(body: dict[str, str]) -> dict[str, object]:
        return {"echo": body, "started": "startup" in events}

    return app


@contextmanager
def serving(load: Callable[[], ASGIApp]) -> Iterator[tuple[str, LoadingApp, uvicorn.Server]]:
    port = free_port()
    server: uvicorn.Server | None = None

    def stop() -> None:
        assert server is not None
        server.should_exit = True

    app = LoadingApp(load, on_failure=stop)
    server = uvicorn.Server(uvicorn.Config(app, port=port, lifespan="on", log_level="warning"))
    thread = threading.Thread(target=server.run)
    thread.start()
    base_url = f"http://127.0.0.1:{port}"
    try:
        _until_answered(f"{base_url}/healthz")
        yield base_url, app, server
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    assert not thread.is_alive()


def _until_answered(url: str) -> httpx.Response:
    for _ in range(200):
        try:
            return httpx.get(url, timeout=5)
        except httpx.ConnectError:
            threading.Event().wait(0.05)
    raise AssertionError(f"{url} never answered")


class HeldLoad:
    """A load that ends when the test calls `release`, then builds the app with `build`
    (noting "loaded" in `events`)."""

    def __init__(self, build: Callable[[], ASGIApp], events: Events | None = None) -> None:
        self._build = build
        self._events = events
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    def __call__(self) -> ASGIApp:
        self._released.wait(timeout=30)
        if self._events is not None:
            self._events.append("loaded")
        return self._build()


def _until_a_request_waits(server: uvicorn.Server) -> None:
    while not server.server_state.tasks:
        threading.Event().wait(0.02)


def test_health_answers_while_loading_and_requests_wait_for_the_started_app() -> None:
    events: Events = []
    load = HeldLoad(lambda: service(events), events)
    with serving(load) as (base_url, _, _), ThreadPoolExecutor(1) as pool:
        assert httpx.get(f"{base_url}/healthz").json() == {"status": "ok"}
        not_ready = httpx.get(f"{base_url}/readyz")
        assert (not_ready.status_code, not_ready.json()["ready"]) == (503, False)
        waiting = pool.submit(httpx.post, f"{base_url}/echo", json={"text": "hi"}, timeout=30)
        assert not waiting.done() and events == []
        load.release()
        answered = waiting.result()
        assert answered.status_code == 200
        assert answered.json() == {"echo": {"text": "hi"}, "started": True}
        assert httpx.get(f"{base_url}/healthz").json() == {"status": "loaded"}  # the app's own
    assert events == ["loaded", "startup", "shutdown"]


def test_stopping_while_loading_does_not_start_the_app() -> None:
    events: Events = []
    load = HeldLoad(lambda: service(events), events)
    with serving(load) as (_, app, _):
        threading.Timer(0.5, load.release).start()  # the load ends after the stop was asked
    assert events == ["loaded"]
    assert not app.failed


def test_a_request_waiting_when_the_server_stops_is_served() -> None:
    """Stopping waits for the requests in flight (the grace period): the app is loaded
    and started for the one that waits for it."""
    events: Events = []
    load = HeldLoad(lambda: service(events))
    with ThreadPoolExecutor(1) as pool, serving(load) as (base_url, _, server):
        waiting = pool.submit(httpx.post, f"{base_url}/echo", json={"text": "hi"}, timeout=30)
        _until_a_request_waits(server)
        server.should_exit = True
        threading.Timer(0.5, load.release).start()
        assert waiting.result().json() == {"echo": {"text": "hi"}, "started": True}
    assert events == ["startup", "shutdown"]


def _failed_load() -> ASGIApp:
    raise ImportError("a module is missing")


def _failed_startup() -> ASGIApp:
    return service([], fail_startup=True)


@pytest.mark.parametrize("fails", [_failed_load, _failed_startup])
def test_a_failed_start_answers_503_and_stops_the_server(fails: Callable[[], ASGIApp]) -> None:
    load = HeldLoad(fails)
    with serving(load) as (base_url, app, server), ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(httpx.post, f"{base_url}/echo", json={"text": "hi"}, timeout=30)
        _until_a_request_waits(server)
        load.release()
        answered = waiting.result()
        assert (answered.status_code, answered.json()) == FAILED
        for _ in range(500):  # stopped by itself
            if server.should_exit:
                break
            threading.Event().wait(0.02)
        assert server.should_exit and app.failed


def test_serving_reports_a_failed_start() -> None:
    port = free_port()
    with ThreadPoolExecutor(1) as pool:
        served = pool.submit(serve_while_loading, _failed_load, port=port, log_level="warning")
        assert served.result(timeout=60) is False
