"""A local stand-in for api.telegram.org: the Bot API methods the bot uses, served over
HTTP on 127.0.0.1 so the real python-telegram-bot stack talks to it unchanged."""

import asyncio
import itertools
import json
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any
from urllib.parse import parse_qs

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

TOKEN = "123456:TEST-TOKEN"
BOT_USER = {"id": 123456, "is_bot": True, "first_name": "Support", "username": "SupportBot"}
LONG_POLL_SECONDS = 0.3  # short, so that stopping the bot never waits on an open poll
# PTB sends every non-string parameter JSON-encoded in a form field.
_JSON_FIELDS = {"chat_id", "message_thread_id", "reply_parameters", "offset", "timeout", "limit"}
_JSON_FIELDS |= {"allowed_updates", "user_id", "link_preview_options", "entities"}
_JSON_FIELDS |= {"reply_markup", "commands", "message_id", "scope"}

Json = dict[str, Any]


def user(user_id: int, first_name: str, last_name: str | None = None) -> Json:
    return {"id": user_id, "is_bot": False, "first_name": first_name, "last_name": last_name}


def chat(chat_id: int, *, forum: bool = False) -> Json:
    if chat_id > 0:
        return {"id": chat_id, "type": "private", "first_name": "Private"}
    return {"id": chat_id, "type": "supergroup", "title": f"Group {chat_id}", "is_forum": forum}


def mention_entities(text: str) -> list[Json]:
    """The `mention` entities Telegram would attach (ASCII texts only: offsets are UTF-16)."""
    entities, start = [], text.find("@")
    while start != -1:
        end = start + 1
        while end < len(text) and (text[end].isalnum() or text[end] == "_"):
            end += 1
        if end - start > 1:
            entities.append({"type": "mention", "offset": start, "length": end - start})
        start = text.find("@", end)
    return entities


class FakeBotApi:
    def __init__(self) -> None:
        self.url = ""
        self.pending: list[Json] = []  # updates not yet confirmed by a getUpdates offset
        self.calls: list[tuple[str, Json]] = []  # every call, refused ones included
        self.delivered: list[Json] = []  # the parameters of each sendMessage that succeeded
        self.bot_messages: list[Json] = []  # what sendMessage returned, to reply to
        self.files: dict[str, bytes] = {}
        self.chat_members: dict[tuple[int, int], str] = {}
        self._send_faults: list[tuple[int, Json]] = []  # answers for the next sendMessages
        self._new_update = asyncio.Event()
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self.app = Starlette(
            routes=[
                Route("/bot{token}/{method}", self._method, methods=["GET", "POST"]),
                Route("/file/bot{token}/{path:path}", self._file, methods=["GET"]),
            ]
        )

    # -- what tests send -------------------------------------------------------------------

    def message(
        self,
        chat_: Json,
        from_: Json,
        text: str | None = None,
        *,
        reply_to: Json | None = None,
        thread_id: int | None = None,
        photo_ids: tuple[str, ...] = (),
        caption: str | None = None,
    ) -> Json:
        """A message as Telegram would deliver it; mentions get their entities."""
        message: Json = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat_,
            "from": from_,
        }
        if text is not None:
            message |= {"text": text, "entities": mention_entities(text)}
            if text.startswith("/"):
                command_length = len(text.split()[0])
                message["entities"].insert(
                    0, {"type": "bot_command", "offset": 0, "length": command_length}
                )
        if caption is not None:
            message |= {"caption": caption, "caption_entities": mention_entities(caption)}
        if photo_ids:
            message["photo"] = [
                {"file_id": f, "file_unique_id": f"u-{f}", "width": 90 * n, "height": 60 * n}
                for n, f in enumerate(photo_ids, start=1)
            ]
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        if thread_id is not None:
            message |= {"message_thread_id": thread_id, "is_topic_message": True}
        return message

    def push(self, message: Json, kind: str = "message") -> Json:
        """Queue a new update for getUpdates; returns it."""
        update = {"update_id": next(self._update_ids), kind: message}
        self.redeliver(update)
        return update

    def redeliver(self, update: Json) -> None:
        """Queue an update again, as if its confirmation had been lost in a crash."""
        self.pending = sorted([*self.pending, update], key=lambda u: u["update_id"])
        self._new_update.set()

    def callback_query(self, from_: Json, message: Json, data: str) -> Json:
        """A click on an inline button under one of the bot's messages."""
        return {
            "id": f"cb-{next(self._update_ids)}",
            "from": from_,
            "message": message,
            "chat_instance": "instance-1",
            "data": data,
        }

    # -- fault injection -------------------------------------------------------------------

    def fail_sends(self, count: int, status: int = 500, retry_after: int | None = None) -> None:
        """Refuse the next `count` sendMessage calls with `status` (429: with retry_after)."""
        body: Json = {"ok": False, "error_code": status, "description": f"Error {status}"}
        if retry_after is not None:
            body |= {
                "description": f"Too Many Requests: retry after {retry_after}",
                "parameters": {"retry_after": retry_after},
            }
        self._send_faults += [(status, body)] * count

    def heal(self) -> None:
        """Every sendMessage succeeds again."""
        self._send_faults.clear()

    # -- what the bot sent -----------------------------------------------------------------

    def sent(self, method: str = "sendMessage") -> list[Json]:
        return [params for name, params in self.calls if name == method]

    def replies_to(self, message: Json) -> list[Json]:
        return [
            sent
            for sent in self.delivered
            if sent.get("reply_parameters", {}).get("message_id") == message["message_id"]
        ]

    async def wait_for_messages(self, count: int, timeout: float = 10.0) -> list[Json]:
        """The messages delivered, once there are `count` of them."""
        return await self.wait_for_calls(count, "sendMessage", timeout, delivered=True)

    async def wait_for_calls(
        self, count: int, method: str, timeout: float = 10.0, *, delivered: bool = False
    ) -> list[Json]:
        """The calls of `method` (`delivered`: the sendMessages that succeeded), once
        there are `count` of them."""
        deadline = time.monotonic() + timeout
        while len(calls := self.delivered if delivered else self.sent(method)) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"expected {count} {method} calls, got {calls}")
            await asyncio.sleep(0.02)
        return calls

    # -- the Bot API -----------------------------------------------------------------------

    async def _method(self, request: Request) -> Response:
        if request.path_params["token"] != TOKEN:
            return JSONResponse(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, 401
            )
        method = request.path_params["method"]
        form = parse_qs((await request.body()).decode())
        params = {
            key: json.loads(values[0]) if key in _JSON_FIELDS else values[0]
            for key, values in form.items()
        }
        self.calls.append((method, params))
        handler: Callable[[Json], Any] = getattr(self, f"_api_{method}")
        if method == "sendMessage" and self._send_faults:
            status, body = self._send_faults.pop(0)
            return JSONResponse(body, status)
        result = handler(params)
        if asyncio.iscoroutine(result):
            result = await result
        return JSONResponse({"ok": True, "result": result})

    async def _file(self, request: Request) -> Response:
        file_id = request.path_params["path"].removeprefix("photos/")
        return Response(self.files[file_id], media_type="image/jpeg")

    def _api_getMe(self, _: Json) -> Json:
        return BOT_USER

    def _api_deleteWebhook(self, _: Json) -> bool:
        return True

    def _api_setWebhook(self, _: Json) -> bool:
        return True

    async def _api_getUpdates(self, params: Json) -> list[Json]:
        # Telegram's contract: an offset confirms every update below it; the others are
        # returned again until confirmed, so a poll cut off mid-way loses nothing.
        offset = params.get("offset", 0)
        self.pending = [u for u in self.pending if u["update_id"] >= offset]
        if not self.pending:
            self._new_update.clear()
            wait = min(float(params.get("timeout", 0)), LONG_POLL_SECONDS)
            with suppress(TimeoutError):
                await asyncio.wait_for(self._new_update.wait(), wait)
        return list(self.pending)

    def _api_sendMessage(self, params: Json) -> Json:
        sent = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat(params["chat_id"]),
            "from": BOT_USER,
            "text": params["text"],
        }
        if "message_thread_id" in params:
            sent |= {"message_thread_id": params["message_thread_id"], "is_topic_message": True}
        if "reply_markup" in params:
            sent["reply_markup"] = params["reply_markup"]
        self.delivered.append(params)
        self.bot_messages.append(sent)
        return sent

    def _api_sendChatAction(self, _: Json) -> bool:
        return True

    def _api_setMyCommands(self, _: Json) -> bool:
        return True

    def _api_answerCallbackQuery(self, _: Json) -> bool:
        return True

    def _api_editMessageReplyMarkup(self, params: Json) -> Json:
        edited = next(m for m in self.bot_messages if m["message_id"] == params["message_id"])
        edited["reply_markup"] = params.get("reply_markup")
        return edited

    def _api_getFile(self, params: Json) -> Json:
        file_id = params["file_id"]
        return {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "file_size": len(self.files[file_id]),
            "file_path": f"photos/{file_id}",
        }

    def _api_getChatMember(self, params: Json) -> Json:
        status = self.chat_members.get((params["chat_id"], params["user_id"]), "member")
        member: Json = {"status": status, "user": user(params["user_id"], "Someone")}
        return member | {"is_anonymous": False} if status == "creator" else member


@asynccontextmanager
async def serve(api: FakeBotApi) -> AsyncIterator[FakeBotApi]:
    """Serve the fake on a free local port for the duration of the block."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    api.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(api.app, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield api
    finally:
        server.should_exit = True
        await task
        sock.close()
