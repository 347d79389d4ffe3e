"""A local HTTP endpoint that records what it is sent and answers with canned JSON."""

import gzip
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Request:
    path: str
    body: bytes


@dataclass
class LocalServer:
    url: str
    requests: list[Request] = field(default_factory=list)
    answer: Callable[[str], Any] = lambda path: {}

    def bodies(self, path: str) -> list[bytes]:
        return [request.body for request in self.requests if request.path == path]


@pytest.fixture
def local_server() -> Iterator[LocalServer]:
    server_state = LocalServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            server_state.requests.append(Request(self.path, body))
            payload = json.dumps(server_state.answer(self.path)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server_state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server_state
    server.shutdown()
    server.server_close()
