"""The staff widget: a standalone page, the one-tag embed script, who is signed in, and
their earlier chats."""

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.auth import StaffDep
from app.api.deps import ChatServiceDep, SettingsDep
from app.api.errors import documented
from app.api.schemas import ConversationListOut, ConversationSummaryOut, WhoAmIOut

WIDGET_DIR = Path(__file__).resolve().parents[1] / "widget"
# Scripts, styles and requests only from the service itself: nothing an answer smuggled
# in could run or load, even if it got past the sanitizer.
PAGE_POLICY = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'"
)


class WidgetPagePolicy:
    """The content security policy on every response under /widget (the page, the queue,
    their static files): and framed only by the pages that embed the widget
    (SUPPORTBOT_WIDGET__FRAME_ANCESTORS), by none when there are none, so no other site
    can show a staff member's widget under its own buttons."""

    def __init__(self, app: ASGIApp, frame_ancestors: list[str]) -> None:
        self.app = app
        ancestors = " ".join(frame_ancestors) or "'none'"
        self.headers = [
            (b"content-security-policy", f"{PAGE_POLICY}; frame-ancestors {ancestors}".encode())
        ]
        if not frame_ancestors:  # for browsers that predate frame-ancestors
            self.headers.append((b"x-frame-options", b"DENY"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == "/widget" or path.startswith("/widget/")):
            await self.app(scope, receive, send)
            return

        async def with_policy(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.headers]}
            await send(message)

        await self.app(scope, receive, with_policy)


router = APIRouter(tags=["widget"])


@router.get("/widget", include_in_schema=False)
async def widget_page() -> FileResponse:
    return FileResponse(WIDGET_DIR / "index.html")


@router.get("/widget/embed.js", include_in_schema=False)
async def embed_script() -> FileResponse:
    return FileResponse(WIDGET_DIR / "embed.js", media_type="text/javascript")


@router.get("/v1/widget/me", responses=documented(401, 403))
async def whoami(caller: StaffDep, settings: SettingsDep) -> WhoAmIOut:
    """The signed-in staff member (401 without staff credentials, 403 with an API key), and
    the example questions the widget offers in an empty chat."""
    return WhoAmIOut(
        name=caller.name,
        conversation_prefix=caller.widget_prefix,
        example_questions=settings.widget.example_questions,
    )


@router.get("/v1/widget/conversations", responses=documented(401, 403, 422))
async def my_conversations(
    caller: StaffDep,
    chat: ChatServiceDep,
    limit: Annotated[int, Query(ge=1, le=200, description="at most this many")] = 50,
) -> ConversationListOut:
    """The signed-in staff member's own widget conversations, the most recently active
    first, each titled by its first question (open one with `GET /v1/conversations/{key}`)."""
    found = await chat.conversations(caller.widget_prefix, limit)
    return ConversationListOut(conversations=[ConversationSummaryOut.of(c) for c in found])
