"""Langfuse tracing: one trace per chat turn, one Langfuse session per conversation.

Built once from settings. With Langfuse off no client exists and a turn hands out no
callbacks, so tracing costs nothing. With it on, a turn is a root observation whose input
is the user's message and whose output is the answer with its citations (what Langfuse
shows as the trace's input and output). Below it `TurnTrace`, a LangChain callback handler,
opens an observation per agent step and tool call with a digest of its input (never the
whole graph state), and one generation per LLM call, which the usage collector closes with
the call's `UsageRecord`: its `usage_details` and `cost_details` are the database's
figures, simulated cache included (marked `cache_source`). Every attribute is bounded
(`max_attribute_chars`).

What the SDK fails to deliver is counted (`supportbot_langfuse_*` metrics) and shutdown
waits a bounded time (`shutdown_timeout_seconds`) for it.
"""

import base64
import json
import logging
import subprocess
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langfuse import Langfuse, propagate_attributes
from langgraph.types import Command
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from app.observability import metrics
from app.observability.usage import (
    UsageRecord,
    UsageTotals,
    langfuse_cost_details,
    langfuse_usage_details,
)
from app.settings import LangfuseSettings, Settings

log = logging.getLogger(__name__)

TRACE_NAME = "chat-turn"
SERVICE_NAME = "supportbot"
TRACES_PATH = "/api/public/otel/v1/traces"
SCORES_PATH = "/api/public/scores"
_MAX_TRACE_ATTRIBUTE = 200  # the SDK drops longer session ids, user ids, tags and metadata
_HIDDEN_TAG = "langsmith:hidden"  # LangGraph's internal runs (writers, branches)


def _clip(value: str, limit: int = _MAX_TRACE_ATTRIBUTE) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def release() -> str:
    """The package version, with the git revision when running from a checkout."""
    try:
        package = version(SERVICE_NAME)
    except PackageNotFoundError:
        package = "unknown"
    try:
        revision = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=2,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        revision = ""
    return f"{package}+{revision}" if revision else package


def feedback_score_id(trace_id: str, feedback_id: int) -> str:
    """The `user_feedback` score's id: the same every time that rating is sent."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"supportbot:{trace_id}:feedback:{feedback_id}").hex


# What observations show of messages and graph states.


def message_view(message: BaseMessage, limit: int) -> dict[str, Any]:
    view: dict[str, Any] = {"role": message.type, "content": _clip(message.text, limit)}
    if isinstance(message, AIMessage) and message.tool_calls:
        view["tool_calls"] = [{"name": c["name"], "args": c["args"]} for c in message.tool_calls]
    if isinstance(message, ToolMessage):
        view["tool"] = message.name
    return view


def messages_view(messages: Sequence[BaseMessage], limit: int) -> list[dict[str, Any]]:
    """The request a model was sent, within `limit` characters as the SDK serializes it
    (JSON, non-ASCII escaped): the first message (the system prompt) and as many of the
    latest as fit; a note says how many were left out."""
    views = [message_view(m, limit // 2) for m in messages]
    if len(json.dumps(views)) <= limit or len(views) < 3:
        return views
    head, tail = views[:1], views[1:]
    budget = limit - len(json.dumps(head)) - 60
    kept: list[dict[str, Any]] = []
    for view in reversed(tail):
        size = len(json.dumps(view)) + 2
        if size > budget:
            break
        kept.insert(0, view)
        budget -= size
    left_out = {"role": "note", "content": f"[{len(tail) - len(kept)} messages not shown]"}
    return [*head, left_out, *kept]


def state_digest(value: Any, limit: int) -> Any:
    """A graph state (or a node's update) as a span shows it: how many messages and the
    last one, never the whole history; other values as JSON-like data, clipped."""
    if isinstance(value, Command):
        return state_digest(value.update, limit)
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        messages = [m for m in value["messages"] if isinstance(m, BaseMessage)]
        digest: dict[str, Any] = {"messages": len(value["messages"])}
        if messages:
            digest["last"] = message_view(messages[-1], limit // 2)
        others = sorted(k for k in value if k != "messages")
        if others:
            digest["keys"] = others
        return digest
    if isinstance(value, BaseMessage):
        return message_view(value, limit)
    if isinstance(value, list | tuple):
        return [state_digest(item, limit // max(1, len(value))) for item in value]
    if isinstance(value, dict):
        return {str(k): state_digest(v, limit // max(1, len(value))) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float):
        return value
    return _clip(str(value), limit)


@dataclass(frozen=True)
class MemoryReport:
    """What the memory profile decided this turn, for an operator to filter on."""

    results_cleared: int = 0
    tokens_freed: int = 0
    exchanges_trimmed: int = 0
    messages_folded: int = 0
    summary_version: int = 0  # summaries stored so far in the conversation
    # Nothing the previous turn sent was rewritten (nothing cleared, trimmed or folded).
    prefix_kept: bool = True

    def tags(self) -> list[str]:
        tags = []
        if self.results_cleared:
            tags.append("memory:cleared")
        if self.exchanges_trimmed:
            tags.append("memory:trimmed")
        if self.messages_folded:
            tags.append("memory:folded")
        if not self.prefix_kept:
            tags.append("memory:prefix-changed")
        return tags

    def metadata(self) -> dict[str, str]:
        """As `memory_*` trace metadata (the SDK propagates string values only)."""
        return {
            "memory_results_cleared": str(self.results_cleared),
            "memory_tokens_freed": str(self.tokens_freed),
            "memory_exchanges_trimmed": str(self.exchanges_trimmed),
            "memory_messages_folded": str(self.messages_folded),
            "memory_summary_version": str(self.summary_version),
            "memory_prefix_kept": str(self.prefix_kept).lower(),
        }


# Counting what does not reach Langfuse.


class _Ledger:
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


class _CountingSpanExporter(SpanExporter):
    def __init__(self, exporter: SpanExporter, ledger: _Ledger) -> None:
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


class _SpanCounter(SpanProcessor):
    def __init__(self, ledger: _Ledger) -> None:
        self._ledger = ledger

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        self._ledger.span_ended()


class _CountingTransport(httpx.HTTPTransport):
    """The SDK's API client's transport: counts failed score uploads and notes which
    scores Langfuse acknowledged (the SDK retries and then drops them silently)."""

    def __init__(self, ledger: _Ledger) -> None:
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


# One turn's trace.


class TurnTrace(BaseCallbackHandler):
    """The observations of one turn below its root: agent steps and tool calls (from
    LangChain callbacks) and generations (opened and closed by the usage collector, whose
    `CallSink` it is). Runs inline (opening a span is cheap; a thread hop per event is
    not) and is sent no model, retriever, retry or custom events."""

    run_inline = True

    @property
    def ignore_llm(self) -> bool:
        return True

    @property
    def ignore_chat_model(self) -> bool:
        return True

    # `ignore_agent` stays False: LangChain sends tool events under it.

    @property
    def ignore_retriever(self) -> bool:
        return True

    @property
    def ignore_retry(self) -> bool:
        return True

    @property
    def ignore_custom_event(self) -> bool:
        return True

    def __init__(self, tracer: "Tracer", root: Any, trace_id: str) -> None:
        self._tracer = tracer
        self._root = root
        self.trace_id = trace_id
        self._limit = tracer.settings.max_attribute_chars
        self._open: dict[UUID, Any] = {}
        self._hidden: dict[UUID, UUID | None] = {}  # hidden run -> its parent run

    def _parent(self, parent_run_id: UUID | None) -> Any:
        while parent_run_id is not None and parent_run_id not in self._open:
            parent_run_id = self._hidden.get(parent_run_id)
        return self._open[parent_run_id] if parent_run_id is not None else self._root

    def _start(self, run_id: UUID, parent_run_id: UUID | None, **observation: Any) -> None:
        self._open[run_id] = self._parent(parent_run_id).start_observation(**observation)

    def _end(self, run_id: UUID, **update: Any) -> None:
        self._hidden.pop(run_id, None)
        observation = self._open.pop(run_id, None)
        if observation is not None:
            observation.update(**update).end()

    def _fail(self, run_id: UUID, error: BaseException) -> None:
        self._end(run_id, level="ERROR", status_message=_clip(str(error), self._limit))

    # LangChain callbacks: graph steps and tools.

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        if _HIDDEN_TAG in (tags or []):
            self._hidden[run_id] = parent_run_id
            return
        name = kwargs.get("name") or (serialized or {}).get("name") or "chain"
        self._start(
            run_id,
            parent_run_id,
            name=str(name),
            as_type="agent" if parent_run_id is None else "chain",
            input=state_digest(inputs, self._limit),
        )

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, output=state_digest(outputs, self._limit))

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._fail(run_id, error)

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "tool"
        self._start(
            run_id,
            parent_run_id,
            name=str(name),
            as_type="tool",
            input=inputs if inputs is not None else _clip(input_str, self._limit),
        )

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, output=state_digest(output, self._limit))

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._fail(run_id, error)

    # The usage collector's calls: generations.

    def call_started(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        *,
        name: str,
        model: str,
        purpose: str,
        messages: list[BaseMessage],
    ) -> None:
        self._start(
            run_id,
            parent_run_id,
            name=name,
            as_type="generation",
            model=model,
            input=messages_view(messages, self._limit),
            metadata={"supportbot_purpose": purpose},
        )

    def call_ended(self, run_id: UUID, record: UsageRecord, reply: AIMessage | None) -> None:
        self._end(
            run_id,
            output=message_view(reply, self._limit) if reply is not None else None,
            model=record.model,
            usage_details=langfuse_usage_details(record),
            cost_details=langfuse_cost_details(record),
            metadata={"supportbot_purpose": record.purpose, "cache_source": record.cache_source},
        )

    def call_failed(self, run_id: UUID, error: BaseException) -> None:
        self._fail(run_id, error)

    # The turn's outcome.

    def finish(
        self,
        answer: str,
        citations: Sequence[dict[str, str]],
        records: Sequence[UsageRecord],
        memory: MemoryReport | None,
    ) -> None:
        """The trace's output, the memory's decisions and the turn's scores."""
        self._root.update(output={"text": _clip(answer, self._limit), "citations": citations})
        self._scores(records, memory)
        if memory is not None:
            # On the root observation (the current one here) and, as trace tags and
            # metadata, on anything the turn still opens.
            with propagate_attributes(tags=memory.tags(), metadata=memory.metadata()):
                pass

    def _scores(self, records: Sequence[UsageRecord], memory: MemoryReport | None) -> None:
        """`cache_hit_rate`: the agent calls' cached share; `context_tokens`: what the last
        agent call was sent; `prefix_kept`: 1 when memory rewrote nothing sent before."""
        agent_calls = [r for r in records if r.purpose == "agent"]
        if agent_calls:
            hit_rate = UsageTotals.of(agent_calls).cached_share
            self._tracer.score(self.trace_id, "cache_hit_rate", hit_rate)
            context = float(agent_calls[-1].input_tokens)
            self._tracer.score(self.trace_id, "context_tokens", context)
        if memory is not None:
            self._tracer.score(self.trace_id, "prefix_kept", float(memory.prefix_kept))

    def failed(self, status: str, error: str) -> None:
        self._root.update(level="ERROR", status_message=_clip(f"{status}: {error}", self._limit))


class Tracer:
    def __init__(self, settings: LangfuseSettings, client: Langfuse | None = None) -> None:
        self.settings = settings
        self._client = client
        self._provider: TracerProvider | None = None
        self._http: httpx.Client | None = None
        self._ledger = _Ledger()

    @classmethod
    def disabled(cls) -> "Tracer":
        """Sends nothing and costs nothing on the hot path."""
        return cls(LangfuseSettings())

    @classmethod
    def from_settings(cls, settings: Settings) -> "Tracer":
        langfuse = settings.langfuse
        tracer = cls(langfuse)
        if langfuse.enabled:
            tracer._connect()
        return tracer

    def _connect(self) -> None:
        langfuse = self.settings
        assert langfuse.public_key and langfuse.secret_key  # what `enabled` means
        secret = langfuse.secret_key.get_secret_value()
        timeout = langfuse.export_timeout_seconds
        this_release = langfuse.release or release()
        # Our own provider: the SDK would otherwise install itself as the process-wide
        # OpenTelemetry provider and export other libraries' spans as well; and its own
        # exit hook would wait for a hanging Langfuse without a bound.
        self._provider = TracerProvider(
            resource=Resource.create(
                {"service.name": SERVICE_NAME, "service.version": this_release}
            ),
            span_limits=SpanLimits(max_span_attribute_length=langfuse.max_attribute_chars),
            shutdown_on_exit=False,
        )
        self._provider.add_span_processor(_SpanCounter(self._ledger))
        auth = base64.b64encode(f"{langfuse.public_key}:{secret}".encode()).decode()
        exporter = OTLPSpanExporter(
            endpoint=langfuse.base_url.rstrip("/") + TRACES_PATH,
            # The headers the SDK's own exporter sends.
            headers={
                "Authorization": f"Basic {auth}",
                "x-langfuse-sdk-name": "python",
                "x-langfuse-sdk-version": version("langfuse"),
                "x-langfuse-public-key": langfuse.public_key,
                "x-langfuse-ingestion-version": "4",
            },
            timeout=timeout,
            compression=Compression.Gzip,
        )
        self._http = httpx.Client(timeout=timeout, transport=_CountingTransport(self._ledger))
        self._client = Langfuse(
            public_key=langfuse.public_key,
            secret_key=secret,
            base_url=langfuse.base_url,
            environment=langfuse.environment,
            release=this_release,
            timeout=timeout,
            tracer_provider=self._provider,
            span_exporter=_CountingSpanExporter(exporter, self._ledger),
            httpx_client=self._http,
        )

    @property
    def enabled(self) -> bool:
        return self._client is not None

    @contextmanager
    def turn(
        self,
        conversation_key: str,
        author: str,
        audience: str,
        profile: str,
        channel: str,
        model: str,
        text: str,
    ) -> Iterator[TurnTrace | None]:
        """One chat turn = one trace whose input is the user's message; the conversation
        is the Langfuse session; audience, profile and channel are tags. None when
        tracing is off."""
        if self._client is None:
            yield None
            return
        labels = {"audience": audience, "profile": profile, "channel": channel}
        tags = [_clip(f"{name}:{value}") for name, value in labels.items()]
        trace_id = self._client.create_trace_id()
        with (
            propagate_attributes(
                session_id=_clip(conversation_key),
                user_id=_clip(author),
                tags=tags,
                trace_name=TRACE_NAME,
                metadata={k: _clip(v) for k, v in {**labels, "chat_model": model}.items()},
            ),
            self._client.start_as_current_observation(
                name=TRACE_NAME,
                as_type="span",
                trace_context={"trace_id": trace_id},
                input={
                    "text": _clip(text, self.settings.max_attribute_chars),
                    "author": author,
                    "channel": channel,
                },
            ) as root,
        ):
            yield TurnTrace(self, root, trace_id)

    def score(
        self,
        trace_id: str,
        name: str,
        value: float,
        comment: str | None = None,
        score_id: str | None = None,
    ) -> None:
        """A numeric score on a trace; its id is ours, so its delivery can be checked."""
        if self._client is None:
            return
        score_id = score_id or uuid.uuid4().hex
        self._ledger.score_queued(score_id)
        self._client.create_score(
            name=name,
            value=value,
            trace_id=trace_id,
            score_id=score_id,
            data_type="NUMERIC",
            comment=comment,
        )

    def feedback(self, trace_id: str, score_id: str, helpful: bool, comment: str | None) -> None:
        """A user's rating of a turn, as the `user_feedback` score (1 helpful, 0 not).
        `score_id` makes a re-send (`supportbot langfuse backfill`) replace, not add."""
        self.score(trace_id, "user_feedback", 1.0 if helpful else 0.0, comment, score_id)

    def delivered(self, score_ids: Sequence[str]) -> set[str]:
        """Those of `score_ids` (sent through this tracer) Langfuse acknowledged."""
        return self._ledger.acknowledged(score_ids)

    def tag(self, trace_id: str, tag: str) -> None:
        """Add `tag` to a turn's trace after the turn (e.g. `handoff`): a span of its own
        on that trace carries it, and Langfuse merges a trace's tags."""
        if self._client is not None:
            with propagate_attributes(tags=[_clip(tag)], trace_name=TRACE_NAME):
                self._client.start_observation(trace_context={"trace_id": trace_id}, name=tag).end()

    def flush(self) -> None:
        """Send what is buffered (spans and scores) and wait for it."""
        if self._client is not None:
            self._client.flush()

    def close(self) -> None:
        """Send what is left, waiting `shutdown_timeout_seconds` at most (a hanging
        Langfuse is given up on); what did not arrive counts as dropped."""
        client, provider, http = self._client, self._provider, self._http
        if client is None:
            return
        self._client = None

        def shut_down() -> None:
            client.shutdown()
            if provider is not None:
                provider.shutdown()
            if http is not None:
                http.close()

        closing = threading.Thread(target=shut_down, name="langfuse-shutdown", daemon=True)
        closing.start()
        closing.join(self.settings.shutdown_timeout_seconds)
        if closing.is_alive():
            log.warning(
                "Langfuse did not take the last spans and scores within %ss: given up",
                self.settings.shutdown_timeout_seconds,
            )
        self._ledger.close()
