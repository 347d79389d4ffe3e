"""A local stand-in for api.telegram.org: the Bot API methods the bot uses, served over
HTTP on 127.0.0.1 so the real python-telegram-bot stack talks to it unchanged."""

import asyncio
import itertools
import json
import re
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
_JSON_FIELDS |= {"reply_markup", "commands", "message_id", "scope", "show_alert", "cache_time"}
_JSON_FIELDS |= {"drop_pending_updates", "max_connections"}
MAX_TEXT_LENGTH = 4096  # UTF-16 code units, as Telegram counts
MAX_CALLBACK_TEXT = 200
# The methods the fake speaks: their parameters (Bot API 9.x) and which are required. Any
# other method is a 404 and any other parameter a 400, stricter than Telegram (which
# ignores unknown parameters), so that a misspelt one fails a test instead of a user.
METHODS: dict[str, tuple[set[str], set[str]]] = {
    "getMe": (set(), set()),
    "deleteWebhook": ({"drop_pending_updates"}, set()),
    "setWebhook": (
        {"url", "ip_address", "max_connections", "allowed_updates", "drop_pending_updates"}
        | {"secret_token"},
        {"url"},
    ),
    "getUpdates": ({"offset", "limit", "timeout", "allowed_updates"}, set()),
    "sendMessage": (
        {"chat_id", "message_thread_id", "text", "parse_mode", "entities"}
        | {"link_preview_options", "disable_notification", "protect_content"}
        | {"reply_parameters", "reply_markup"},
        {"chat_id", "text"},
    ),
    "sendChatAction": ({"chat_id", "message_thread_id", "action"}, {"chat_id", "action"}),
    "setMyCommands": ({"commands", "scope", "language_code"}, {"commands"}),
    "answerCallbackQuery": (
        {"callback_query_id", "text", "show_alert", "url", "cache_time"},
        {"callback_query_id"},
    ),
    "editMessageReplyMarkup": (
        # python-telegram-bot adds the default parse_mode here; Telegram ignores it
        {"chat_id", "message_id", "inline_message_id", "reply_markup", "parse_mode"},
        set(),
    ),
    "getFile": ({"file_id"}, {"file_id"}),
    "getChatMember": ({"chat_id", "user_id"}, {"chat_id", "user_id"}),
}

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


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def refusal(status: int, description: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error_code": status, "description": description}, status)


class BadRequest(Exception):
    """Telegram's 400 with its description."""


class FakeBotApi:
    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.url = ""
        self.pending: list[Json] = []  # updates not yet confirmed by a getUpdates offset
        self.calls: list[tuple[str, Json]] = []  # every call, refused ones included
        self.delivered: list[Json] = []  # the parameters of each sendMessage that succeeded
        self.bot_messages: list[Json] = []  # what sendMessage returned, to reply to
        self.files: dict[str, bytes] = {}
        self.chat_members: dict[tuple[int, int], str] = {}
        self.commands: dict[str | None, list[Json]] = {}  # setMyCommands by language_code
        self.answered_callbacks: dict[str, Json] = {}  # answerCallbackQuery by query id
        self._faults: dict[str, list[tuple[int, Json]]] = {}  # answers for the next calls
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
        document: Json | None = None,
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
        if document is not None:
            message["document"] = document
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

    def click(self, from_: Json, message: Json, button_text: str) -> Json:
        """Push a click on the inline button labelled `button_text` under `message` (one of
        the bot's messages, as it is now); returns the callback query."""
        rows = message["reply_markup"]["inline_keyboard"]
        button = next(b for row in rows for b in row if b["text"] == button_text)
        query = self.callback_query(from_, message, button["callback_data"])
        self.push(query, kind="callback_query")
        return query

    async def wait_for_answered_callback(self, query: Json, timeout: float = 10.0) -> Json:
        deadline = time.monotonic() + timeout
        while query["id"] not in self.answered_callbacks:
            if time.monotonic() > deadline:
                raise AssertionError(f"callback query {query['id']} was not answered")
            await asyncio.sleep(0.02)
        return self.answered_callbacks[query["id"]]

    # -- fault injection -------------------------------------------------------------------

    def fail(
        self, method: str, count: int, status: int = 500, retry_after: int | None = None
    ) -> None:
        """Refuse the next `count` calls of `method` with `status` (429: with retry_after)."""
        body: Json = {"ok": False, "error_code": status, "description": f"Error {status}"}
        if retry_after is not None:
            body |= {
                "description": f"Too Many Requests: retry after {retry_after}",
                "parameters": {"retry_after": retry_after},
            }
        self._faults.setdefault(method, []).extend([(status, body)] * count)

    def fail_sends(self, count: int, status: int = 500, retry_after: int | None = None) -> None:
        """Refuse the next `count` sendMessage calls with `status` (429: with retry_after)."""
        self.fail("sendMessage", count, status, retry_after)

    def heal(self) -> None:
        """Every call succeeds again."""
        self._faults.clear()

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
        method = request.path_params["method"]
        form = parse_qs((await request.body()).decode())
        params = {
            key: json.loads(values[0]) if key in _JSON_FIELDS else values[0]
            for key, values in form.items()
        }
        self.calls.append((method, params))
        if request.path_params["token"] != self.token:
            return refusal(401, "Unauthorized")
        if method not in METHODS:
            return refusal(404, "Not Found")
        known, required = METHODS[method]
        if unknown := sorted(params.keys() - known):
            return refusal(400, f"Bad Request: unknown parameter {unknown[0]}")
        if missing := sorted(required - params.keys()):
            return refusal(400, f"Bad Request: parameter {missing[0]} is required")
        if faults := self._faults.get(method):
            status, body = faults.pop(0)
            return JSONResponse(body, status)
        handler: Callable[[Json], Any] = getattr(self, f"_api_{method}")
        try:
            result = handler(params)
            if asyncio.iscoroutine(result):
                result = await result
        except BadRequest as error:
            return refusal(400, f"Bad Request: {error}")
        return JSONResponse({"ok": True, "result": result})

    async def _file(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return refusal(401, "Unauthorized")
        file_id = request.path_params["path"].split("/", 1)[-1]
        return Response(self.files[file_id], media_type="application/octet-stream")

    def _api_getMe(self, _: Json) -> Json:
        return BOT_USER

    def _api_deleteWebhook(self, _: Json) -> bool:
        return True

    def _api_setWebhook(self, _: Json) -> bool:
        return True

    async def _api_getUpdates(self, params: Json) -> list[Json]:
        # Telegram's contract: an offset confirms every update below it; the others are
        # returned again until confirmed, so a poll cut off mid-way loses nothing. Updates
        # of a kind the bot did not ask for (allowed_updates) are never delivered.
        offset = params.get("offset", 0)
        allowed = set(params.get("allowed_updates") or [])
        self.pending = [
            u
            for u in self.pending
            if u["update_id"] >= offset and (not allowed or allowed & u.keys())
        ]
        if not self.pending:
            self._new_update.clear()
            wait = min(float(params.get("timeout", 0)), LONG_POLL_SECONDS)
            with suppress(TimeoutError):
                await asyncio.wait_for(self._new_update.wait(), wait)
        return list(self.pending)

    def _api_sendMessage(self, params: Json) -> Json:
        if not params["text"].strip():
            raise BadRequest("message text is empty")
        if utf16_len(params["text"]) > MAX_TEXT_LENGTH:
            raise BadRequest("message is too long")
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

    def _api_setMyCommands(self, params: Json) -> bool:
        for command in params["commands"]:
            if not re.fullmatch(r"[a-z0-9_]{1,32}", command["command"]):
                raise BadRequest("BOT_COMMAND_INVALID")
            if not 1 <= len(command["description"]) <= 256:
                raise BadRequest("BOT_COMMAND_DESCRIPTION_INVALID")
        self.commands[params.get("language_code")] = params["commands"]
        return True

    def _api_answerCallbackQuery(self, params: Json) -> bool:
        if len(params.get("text", "")) > MAX_CALLBACK_TEXT:
            raise BadRequest("MESSAGE_TOO_LONG")
        if params["callback_query_id"] in self.answered_callbacks:
            raise BadRequest("query is too old and response timeout expired or query ID is invalid")
        self.answered_callbacks[params["callback_query_id"]] = params
        return True

    def _api_editMessageReplyMarkup(self, params: Json) -> Json:
        edited = next(
            (
                m
                for m in self.bot_messages
                if m["message_id"] == params.get("message_id")
                and m["chat"]["id"] == params.get("chat_id")
            ),
            None,
        )
        if edited is None:
            raise BadRequest("message to edit not found")
        if edited.get("reply_markup") == params.get("reply_markup"):
            raise BadRequest(
                "message is not modified: specified new message content and reply markup "
                "are exactly the same as a current content and reply markup of the message"
            )
        edited["reply_markup"] = params.get("reply_markup")
        return edited

    def _api_getFile(self, params: Json) -> Json:
        file_id = params["file_id"]
        if file_id not in self.files:
            raise BadRequest("invalid file_id")
        return {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "file_size": len(self.files[file_id]),
            "file_path": f"files/{file_id}",
        }

    def _api_getChatMember(self, params: Json) -> Json:
        status = self.chat_members.get((params["chat_id"], params["user_id"]), "member")
        member: Json = {"status": status, "user": user(params["user_id"], "Someone")}
        if status == "administrator":  # the rights the Bot API always lists for one
            rights = [
                *("manage_chat", "delete_messages", "manage_video_chats", "restrict_members"),
                *("promote_members", "change_info", "invite_users", "post_stories"),
                *("edit_stories", "delete_stories"),
            ]
            member |= {f"can_{right}": False for right in rights} | {"can_be_edited": False}
        return (
            member | {"is_anonymous": False} if status in ("creator", "administrator") else member
        )


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
