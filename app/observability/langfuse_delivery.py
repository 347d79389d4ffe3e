"""Counting what does not reach Langfuse: the span exporter and the score uploads report to
a `Ledger`, whose leftovers at shutdown count as dropped (`supportbot_langfuse_*` metrics)."""

import json
import threading
from collections.abc import Sequence

import httpx
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from app.observability import metrics

TRACES_PATH = "/api/public/otel/v1/traces"
SCORES_PATH = "/api/public/scores"


class Ledger:
    """Spans and scores handed to the SDK that Langfuse has not acknowledged yet: what is
    still pending when the tracer closes counts as dropped. Only ids of pending or lost
    scores are kept, so a long-running process holds nothing per delivered score."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans_ended = 0
        self.spans_settled = 0  # exported, or counted dropped with their failed export
        self.scores_pending: set[str] = set()
        self.scores_lost: set[str] = set()  # pending when the tracer closed

    def span_ended(self) -> None:
        with self._lock:
            self.spans_ended += 1

    def spans_exported(self, count: int, ok: bool) -> None:
        with self._lock:
            self.spans_settled += count
        if not ok:
            metrics.count_langfuse_failure("spans")
            metrics.count_langfuse_dropped("spans", count)

    def score_queued(self, score_id: str) -> None:
        with self._lock:
            self.scores_pending.add(score_id)

    def delivered(self, score_ids: Sequence[str]) -> None:
        with self._lock:
            self.scores_pending.difference_update(score_ids)

    def acknowledged(self, score_ids: Sequence[str]) -> set[str]:
        with self._lock:
            return set(score_ids) - self.scores_pending - self.scores_lost

    def close(self) -> None:
        with self._lock:
            spans = self.spans_ended - self.spans_settled
            self.spans_settled = self.spans_ended
            scores = len(self.scores_pending)
            self.scores_lost |= self.scores_pending
            self.scores_pending = set()
        metrics.count_langfuse_dropped("spans", spans)
        metrics.count_langfuse_dropped("scores", scores)


class CountingSpanExporter(SpanExporter):
    def __init__(self, exporter: SpanExporter, ledger: Ledger) -> None:
        self._exporter = exporter
        self._ledger = ledger

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._exporter.export(spans)
        except Exception:
            result = SpanExportResult.FAILURE
        self._ledger.spans_exported(len(spans), result is SpanExportResult.SUCCESS)
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


class SpanCounter(SpanProcessor):
    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        self._ledger.span_ended()


class CountingTransport(httpx.HTTPTransport):
    """The SDK's API client's transport: counts failed score uploads and notes which
    scores Langfuse acknowledged (the SDK retries and then drops them silently)."""

    def __init__(self, ledger: Ledger) -> None:
        super().__init__()
        self._ledger = ledger

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        scores = request.url.path.endswith(SCORES_PATH)
        try:
            response = super().handle_request(request)
        except httpx.TransportError:
            if scores:
                metrics.count_langfuse_failure("scores")
            raise
        # 207: Langfuse rejected some of the batch without saying which; none counts as
        # acknowledged (a re-sent score replaces the one that did arrive).
        if scores and (response.status_code >= 400 or response.status_code == 207):
            metrics.count_langfuse_failure("scores")
        elif scores:
            sent = json.loads(request.content or b"[]")
            batch = sent if isinstance(sent, list) else [sent]
            self._ledger.delivered([str(s.get("id")) for s in batch if isinstance(s, dict)])
        return response
