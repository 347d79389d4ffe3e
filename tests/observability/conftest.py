"""A local HTTP endpoint that records what it is sent and answers with canned JSON: with
the Langfuse SDK pointed at it, a fake Langfuse (OTLP spans, JSON scores) that can also
fail (`status`) or hang (`hang`)."""

import gzip
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


@dataclass
class Request:
    path: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case


@dataclass
class LocalServer:
    url: str
    requests: list[Request] = field(default_factory=list)
    answer: Callable[[str], Any] = lambda path: {}
    status: int = 200
    # While set, every request waits (until the test ends) before it is answered.
    hang: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

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
            headers = {name.lower(): value for name, value in self.headers.items()}
            server_state.requests.append(Request(self.path, body, headers))
            if server_state.hang.is_set():
                server_state.released.wait()
            payload = json.dumps(server_state.answer(self.path)).encode()
            self.send_response(server_state.status)
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
    server_state.released.set()
    server.shutdown()
    server.server_close()


TRACES_PATH = "/api/public/otel/v1/traces"
SCORES_PATH = "/api/public/scores"


def exported_spans(server: LocalServer) -> list[dict[str, Any]]:
    """Every span the SDK exported, as its attributes plus `trace_id`, `span_id`,
    `parent_id`, `name` and the resource's attributes under `resource.`."""
    spans = []
    for body in server.bodies(TRACES_PATH):
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            resource = {
                f"resource.{key}": value
                for key, value in _attributes(resource_spans.resource.attributes).items()
            }
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        {
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_id": span.parent_span_id.hex(),
                            "name": span.name,
                            **resource,
                            **_attributes(span.attributes),
                        }
                    )
    return spans


def _attributes(attributes: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for attribute in attributes:
        value = attribute.value
        if value.HasField("array_value"):
            found[attribute.key] = [item.string_value for item in value.array_value.values]
        else:
            found[attribute.key] = getattr(value, value.WhichOneof("value"))
    return found


def exported_scores(server: LocalServer) -> list[dict[str, Any]]:
    return [score for body in server.bodies(SCORES_PATH) for score in json.loads(body)]
