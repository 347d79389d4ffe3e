"""Serving while the service loads: the port answers `/healthz` as soon as it is bound,
while the app (FastAPI, LangChain, the runtime: seconds of imports on a 2-core machine) is
imported on a worker thread and started; every other request waits for it.

`LoadingApp` is a plain ASGI app (no FastAPI here: importing it is what takes the time).
It completes the server's start-up at once, then runs the loaded app's own start-up and,
at shutdown, its shutdown (ASGI lifespan messages, forwarded). When loading or the loaded
app's start-up fails, the waiting requests get a 503 and the server is stopped: the
process exits with an error, as it did when loading came before the port was bound."""

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import uvicorn

from app.start_up_errors import describe

if TYPE_CHECKING:
    from app.settings import Settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger(__name__)

# What the probes get before the app is loaded: alive, not ready.
WHILE_LOADING: dict[str, tuple[int, dict[str, Any]]] = {
    "/healthz": (200, {"status": "ok"}),
    "/readyz": (503, {"ready": False, "down": ["loading"]}),
}
FAILED = (503, {"detail": "the service failed to start; see its log"})


class LoadingApp:
    """Serves `load()`'s app once it is loaded and started (see the module docstring);
    `on_failure` is called when it cannot be (to stop the server)."""

    def __init__(self, load: Callable[[], ASGIApp], on_failure: Callable[[], None]) -> None:
        self._load = load
        self._on_failure = on_failure
        self._loaded: asyncio.Future[ASGIApp] | None = None
        self._app: ASGIApp | None = None  # once loaded and started
        self._lifespan: _Lifespan | None = None
        self._stopping = False
        self.failed = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (app := self._app) is not None:
            await app(scope, receive, send)
            return
        if scope["type"] == "lifespan":
            await self._serve_lifespan(scope, receive, send)
            return
        loaded = self._loaded
        assert loaded is not None, "served without the lifespan protocol (lifespan='on')"
        if not loaded.done() and scope["type"] == "http" and scope["path"] in WHILE_LOADING:
            await _answer(send, *WHILE_LOADING[scope["path"]])
            return
        try:
            app = await asyncio.shield(loaded)
        except Exception:
            if scope["type"] == "http":
                await _answer(send, *FAILED)
            return
        await app(scope, receive, send)

    async def _serve_lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        self._loaded = asyncio.get_running_loop().create_future()
        starting = asyncio.create_task(self._start(scope, self._loaded))
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        self._stopping = True  # an app still loading is not started
        await starting  # a thread that imports cannot be stopped: its end, then the app's
        if self._lifespan is not None:
            await self._lifespan.shut_down()
        await send({"type": "lifespan.shutdown.complete"})

    async def _start(self, scope: Scope, loaded: "asyncio.Future[ASGIApp]") -> None:
        lifespan = None
        started = time.perf_counter()
        try:
            app = await asyncio.to_thread(self._load)
            if self._stopping:  # the server stops: requests in flight have had their time
                loaded.set_exception(RuntimeError("stopped while loading"))
                loaded.exception()
                return
            lifespan = _Lifespan(app, scope)
            await lifespan.start()
        except Exception as error:
            lines = None if log.isEnabledFor(logging.DEBUG) else describe(error)
            if lines is None:
                log.exception("the service could not start")
            for line in lines or ():  # a setting or a dependency: one line each
                log.error("the service could not start: %s", line)
            if lifespan is not None:
                await lifespan.abandon()
            self.failed = True
            loaded.set_exception(error)
            loaded.exception()  # retrieved: the requests that wait answer 503
            self._on_failure()
            return
        self._lifespan = lifespan
        self._app = app
        loaded.set_result(app)
        log.info("the service is loaded and started (%.2f s)", time.perf_counter() - started)


class _Lifespan:
    """The loaded app's lifespan, driven by messages as a server drives it."""

    def __init__(self, app: ASGIApp, scope: Scope) -> None:
        self._inbox: asyncio.Queue[Message] = asyncio.Queue()
        self._outbox: asyncio.Queue[Message] = asyncio.Queue()
        self._error: Exception | None = None
        self._running = asyncio.create_task(self._run(app, scope))

    async def _run(self, app: ASGIApp, scope: Scope) -> None:
        try:
            await app(scope, self._inbox.get, self._outbox.put)
        except Exception as error:  # Starlette re-raises what start-up or shutdown raised
            self._error = error
            await self._outbox.put({"type": "lifespan.error"})

    async def _step(self, phase: str) -> None:
        await self._inbox.put({"type": f"lifespan.{phase}"})
        reply = await self._outbox.get()
        if reply["type"] == f"lifespan.{phase}.complete":
            return
        await asyncio.wait([self._running], timeout=5)  # what it raises after `failed`
        if self._error is not None:
            raise RuntimeError(f"the app's {phase} failed") from self._error
        raise RuntimeError(f"the app's {phase} failed: {reply.get('message', '')}")

    async def start(self) -> None:
        await self._step("startup")

    async def shut_down(self) -> None:
        try:
            await self._step("shutdown")
        finally:
            await self._running

    async def abandon(self) -> None:
        """After a failed start-up: nothing more is sent to it."""
        self._running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._running


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    content = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(content))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})


def service_app(settings: "Settings") -> ASGIApp:
    """The service's app (what `LoadingApp` loads), its modules imported as a server
    loads them (`app.loading`)."""
    from app.loading import loading_without_collection

    with loading_without_collection():
        from app.api.main import create_app

    return create_app(settings)


def serve_while_loading(
    load: Callable[[], ASGIApp],
    sockets: list[socket.socket] | None = None,
    **config: Any,
) -> bool:
    """Serve `load()`'s app with uvicorn (`config`: `uvicorn.Config`'s settings) until the
    server is stopped; False when the app could not be loaded or started, or the server
    could not."""
    server: uvicorn.Server | None = None

    def stop() -> None:
        if server is not None:
            server.should_exit = True

    app = LoadingApp(load, on_failure=stop)
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", **config))
    server.run(sockets=sockets)
    return server.started and not app.failed
