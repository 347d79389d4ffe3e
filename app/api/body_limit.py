"""A request body size limit, as ASGI middleware: a body over the limit gets 413 with the
API's error body before the app sees any of it, whether it announces its length or comes
chunked. (FastAPI's own `max_body_size` answers in plain text from inside the route.)"""

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        # Every route reads its whole body anyway: read it here, at most max_bytes of it.
        received: list[Message] = []
        size = 0
        while True:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request":  # the client went away
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(received, receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse(
            {"detail": f"the request body is larger than {self.max_bytes} bytes"},
            status_code=413,
            headers={"Connection": "close"},  # the rest of the body stays unread
        )
        await response(scope, receive, send)


def _replay(received: list[Message], receive: Receive) -> Receive:
    """The body as it was read, then the live channel: a streaming response listens to it
    for the client's disconnect."""
    pending = list(received)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed
