"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

It speaks `POST /v1/chat/completions` over real HTTP (non-streaming and `stream: true`
server-sent events ending in `data: [DONE]`, tool calls in both, `usage` with
`prompt_tokens_details.cached_tokens`, honouring `stream_options.include_usage`), so any
OpenAI client (``langchain_openai.ChatOpenAI(base_url=...)``, ``SUPPORTBOT_LLM__BASE_URL``)
runs against it unchanged.

    with ScriptedLLM([Fault.RATE_LIMIT, Reply("**Hi**")]) as base_url:
        ChatOpenAI(model="scripted", base_url=base_url, api_key="dummy").invoke("hello")

Each request takes the next item of the script: a `Reply` (text and/or tool calls) or a
`Fault`. Once the script is used up, a request fails at `fault_rate` (a seeded choice among
`fault_kinds`) or is answered by `policy`; the default policy calls `search_knowledge_base`
with the user's last message, then answers in Markdown quoting the tool's result. Every
request is recorded in `received` (body, headers, what was done), so a test can assert what
the provider was sent, retries included.

Cached tokens are counted like a provider's prefix cache: the prompt (tools, then messages,
as JSON) in blocks of 512 characters (~128 tokens); a block is cached when the same prefix up
to its end was sent before. The cost per call does not grow with the number of conversations.
One module: the protocol, the script and the server are what a test starts as one thing.
"""

import contextlib
import hashlib
import json
import random
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from types import TracebackType
from typing import Any

CHARS_PER_TOKEN = 4
CACHE_BLOCK_CHARS = 512
KNOWLEDGE_TOOL = "search_knowledge_base"


class Fault(StrEnum):
    """What a failing request gets instead of an answer."""

    RATE_LIMIT = "429"  # with Retry-After: `retry_after_seconds`
    SERVER_ERROR = "500"
    BAD_GATEWAY = "502"
    UNAVAILABLE = "503"
    TIMEOUT = "timeout"  # no answer for `hang_seconds` (longer than the client's timeout)
    MALFORMED = "malformed"  # 200 with a body (or event) that is not valid JSON
    DROP = "drop"  # the connection is closed without a response


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """One assistant message: Markdown text, tool calls, or both."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()

    @classmethod
    def call(cls, name: str, **arguments: Any) -> "Reply":
        """One tool call: ``Reply.call("search_knowledge_base", query="VAT")``."""
        return cls(tool_calls=(ToolCall(name, arguments),))


Policy = Callable[[dict[str, Any]], Reply]


@dataclass(frozen=True)
class Received:
    """One request as the server saw it, and what it did with it."""

    body: dict[str, Any]
    headers: dict[str, str]
    fault: Fault | None
    reply: Reply | None
    at: float  # time.monotonic() on arrival


def message_text(message: dict[str, Any]) -> str:
    """The text of an OpenAI message whose content is a string or a list of parts."""
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content if part.get("type") == "text")


def default_policy(body: dict[str, Any]) -> Reply:
    """Search the knowledge base with the user's last message, then answer quoting the result."""
    messages: list[dict[str, Any]] = body.get("messages", [])
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    question = message_text(messages[last_user]) if last_user >= 0 else ""
    results = [message_text(m) for m in messages[last_user + 1 :] if m.get("role") == "tool"]
    if results:
        lines = [line for line in results[-1].splitlines() if line.strip()][:4]
        quote = "\n".join(f"> {line}" for line in lines) or "> (no passages)"
        return Reply(f"**From the help center:**\n\n{quote}\n\nThat should answer *{question}*.")
    for declared in body.get("tools", []):
        function = declared.get("function", {})
        if function.get("name") == KNOWLEDGE_TOOL:
            required = function.get("parameters", {}).get("required") or ["query"]
            return Reply.call(KNOWLEDGE_TOOL, **{required[0]: question})
    return Reply(f"**Answer:** {question}")


@dataclass
class _PrefixCache:
    """Hashes of every block-aligned prompt prefix sent so far."""

    seen: set[bytes] = field(default_factory=set)

    def cached_tokens(self, prompt: str) -> int:
        digest = hashlib.blake2b(digest_size=16)
        cached_blocks, hit = 0, True
        for block, start in enumerate(
            range(0, len(prompt) - CACHE_BLOCK_CHARS + 1, CACHE_BLOCK_CHARS)
        ):
            digest.update(prompt[start : start + CACHE_BLOCK_CHARS].encode())
            key = digest.copy().digest()
            if hit and key in self.seen:
                cached_blocks = block + 1
            else:
                hit = False
            self.seen.add(key)
        return cached_blocks * CACHE_BLOCK_CHARS // CHARS_PER_TOKEN


class ScriptedLLM:
    """The server; a context manager that starts it and returns its `base_url` (ends in /v1)."""

    def __init__(
        self,
        script: Iterable[Reply | Fault] = (),
        *,
        policy: Policy = default_policy,
        fault_rate: float = 0.0,
        fault_kinds: Sequence[Fault] = tuple(Fault),
        seed: int = 0,
        latency_seconds: float = 0.0,
        hang_seconds: float = 30.0,
        retry_after_seconds: int = 1,
    ) -> None:
        self.policy = policy
        self.fault_rate = fault_rate
        self.fault_kinds = tuple(fault_kinds)
        self.latency_seconds = latency_seconds
        self.hang_seconds = hang_seconds
        self.retry_after_seconds = retry_after_seconds
        self.received: list[Received] = []
        self._script: deque[Reply | Fault] = deque(script)
        self._random = random.Random(seed)
        self._cache = _PrefixCache()
        self._ids = count(1)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control -------------------------------------------------------------------------

    def add(self, *items: Reply | Fault) -> None:
        """Append to the script."""
        with self._lock:
            self._script.extend(items)

    def fail_next(self, *faults: Fault) -> None:
        """The next requests get these faults, before the rest of the script."""
        with self._lock:
            self._script.extendleft(reversed(faults))

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request body received, in order, faulted ones included."""
        return [received.body for received in self.received]

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the scripted LLM is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> str:
        self._stopping.clear()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.scripted = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        self._stopping.set()  # releases hanging and slow requests
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = self._thread = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- one request ---------------------------------------------------------------------

    def _decide(self, body: dict[str, Any], headers: dict[str, str]) -> Received:
        arrived = time.monotonic()
        with self._lock:
            item = self._script.popleft() if self._script else None
            if item is None and self.fault_rate and self._random.random() < self.fault_rate:
                item = self._random.choice(self.fault_kinds)
        if item is None:
            item = self.policy(body)
        received = Received(
            body,
            headers,
            item if isinstance(item, Fault) else None,
            item if isinstance(item, Reply) else None,
            arrived,
        )
        with self._lock:
            self.received.append(received)
        return received

    def _wait(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def _usage(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        prompt = json.dumps(body.get("tools", []), sort_keys=True) + json.dumps(
            body.get("messages", []), sort_keys=True
        )
        with self._lock:
            cached = self._cache.cached_tokens(prompt)
        completion = len(reply.text) + sum(len(json.dumps(c.arguments)) for c in reply.tool_calls)
        prompt_tokens = max(1, len(prompt) // CHARS_PER_TOKEN)
        completion_tokens = max(1, completion // CHARS_PER_TOKEN)
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": min(cached, prompt_tokens)},
            "completion_tokens_details": {"reasoning_tokens": 0},
        }

    def _next_id(self) -> str:
        with self._lock:
            return f"chatcmpl-scripted-{next(self._ids)}"


def _tool_calls(reply: Reply, response_id: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{response_id.rsplit('-', 1)[1]}_{index}",
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for index, call in enumerate(reply.tool_calls)
    ]


def _finish_reason(reply: Reply) -> str:
    return "tool_calls" if reply.tool_calls else "stop"


def completion_body(
    reply: Reply, model: str, response_id: str, usage: dict[str, Any]
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls(reply, response_id)
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(reply)}],
        "usage": usage,
    }


def stream_chunks(
    reply: Reply, model: str, response_id: str, usage: dict[str, Any] | None
) -> Iterator[dict[str, Any]]:
    """The chat.completion.chunk objects of one streamed reply, usage last when asked for."""

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": response_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    yield chunk({"role": "assistant", "content": ""})
    for piece in re.findall(r"\S+\s*|\s+", reply.text):
        yield chunk({"content": piece})
    for index, call in enumerate(_tool_calls(reply, response_id)):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2  # two deltas, so clients must accumulate them
        head = {
            **call,
            "function": {"name": call["function"]["name"], "arguments": arguments[:half]},
        }
        yield chunk({"tool_calls": [{"index": index, **head}]})
        yield chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]})
    yield chunk({}, _finish_reason(reply))
    if usage is not None:
        yield {**chunk({}), "choices": [], "usage": usage}


ERRORS = {
    Fault.RATE_LIMIT: (429, "rate_limit_error", "Rate limit reached, retry later"),
    Fault.SERVER_ERROR: (500, "server_error", "The server had an error"),
    Fault.BAD_GATEWAY: (502, "server_error", "Bad gateway"),
    Fault.UNAVAILABLE: (503, "server_error", "The engine is currently overloaded"),
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like a real provider

    @property
    def scripted(self) -> ScriptedLLM:
        return self.server.scripted  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests and benchmarks read `received` instead."""

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON", "type": "invalid_request"}})
            return
        scripted = self.scripted
        received = scripted._decide(body, dict(self.headers.items()))
        if scripted.latency_seconds:
            scripted._wait(scripted.latency_seconds)
        try:
            if received.fault is not None:
                self._fault(received.fault, bool(body.get("stream")))
            elif received.reply is not None:
                self._answer(body, received.reply)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up first
            self.close_connection = True

    def _answer(self, body: dict[str, Any], reply: Reply) -> None:
        scripted = self.scripted
        model, response_id = str(body.get("model", "scripted")), scripted._next_id()
        usage = scripted._usage(body, reply)
        if not body.get("stream"):
            self._json(200, completion_body(reply, model, response_id, usage))
            return
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self._start_stream()
        for chunk in stream_chunks(reply, model, response_id, usage if include_usage else None):
            self._event(json.dumps(chunk))
        self._event("[DONE]")
        self._end_stream()

    def _fault(self, fault: Fault, stream: bool) -> None:
        scripted = self.scripted
        if fault in ERRORS:
            status, kind, message = ERRORS[fault]
            headers = {"Retry-After": str(scripted.retry_after_seconds)} if status == 429 else {}
            self._json(status, {"error": {"message": message, "type": kind, "code": kind}}, headers)
        elif fault is Fault.TIMEOUT:
            scripted._wait(scripted.hang_seconds)
            self._drop()
        elif fault is Fault.DROP:
            self._drop()
        elif stream:
            self._start_stream()
            self._event('{"id": "chatcmpl-broken", "choices": [{"delta": {"content": "Hal')
            self._event("[DONE]")
            self._end_stream()
        else:
            self._send(200, b'{"id": "chatcmpl-broken", "choices": [', "application/json")

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json", headers)

    def _send(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _event(self, data: str) -> None:
        payload = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):  # the client may have closed it already
            self.connection.shutdown(socket.SHUT_RDWR)
