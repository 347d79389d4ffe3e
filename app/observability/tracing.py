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
import logging
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

import httpx

from app.observability.langfuse_delivery import (
    TRACES_PATH,
    CountingSpanExporter,
    CountingTransport,
    Ledger,
    SpanCounter,
)
from app.observability.turn_trace import MemoryReport, TurnTrace, clip, messages_view
from app.settings import LangfuseSettings, Settings

if TYPE_CHECKING:  # imported when tracing is on: the Langfuse SDK takes ~0.3 s to import
    from langfuse import Langfuse
    from opentelemetry.sdk.trace import TracerProvider

# The turn's handler and the delivery counting live in their own modules; the names
# callers use stay importable from here.
__all__ = ["MemoryReport", "Tracer", "TurnTrace", "feedback_score_id", "messages_view", "release"]

log = logging.getLogger(__name__)

TRACE_NAME = "chat-turn"
SERVICE_NAME = "supportbot"


def turn_owner(conversation_key: str, author: str | None) -> tuple[str, str]:
    """Whose a turn's spans are: the conversation is the Langfuse session (the first),
    the person who asked the user (the second)."""
    return clip(conversation_key), clip(author or "anonymous")


def release() -> str:
    """The installed package's version, from its metadata (never the revision of whatever
    repository the service happens to run in)."""
    try:
        return version(SERVICE_NAME)
    except PackageNotFoundError:  # imported from a folder that was never installed
        return "unknown"


def feedback_score_id(trace_id: str, feedback_id: int) -> str:
    """The `user_feedback` score's id: the same every time that rating is sent."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"supportbot:{trace_id}:feedback:{feedback_id}").hex


class Tracer:
    def __init__(self, settings: LangfuseSettings, client: "Langfuse | None" = None) -> None:
        self.settings = settings
        self._client = client
        self._provider: TracerProvider | None = None
        self._http: httpx.Client | None = None
        self._ledger = Ledger()

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
        from langfuse import Langfuse
        from opentelemetry.exporter.otlp.proto.http import Compression
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import SpanLimits, TracerProvider

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
        self._provider.add_span_processor(SpanCounter(self._ledger))
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
        self._http = httpx.Client(timeout=timeout, transport=CountingTransport(self._ledger))
        self._client = Langfuse(
            public_key=langfuse.public_key,
            secret_key=secret,
            base_url=langfuse.base_url,
            environment=langfuse.environment,
            release=this_release,
            timeout=timeout,
            tracer_provider=self._provider,
            span_exporter=CountingSpanExporter(exporter, self._ledger),
            httpx_client=self._http,
        )

    @property
    def enabled(self) -> bool:
        return self._client is not None

    @contextmanager
    def turn(
        self,
        conversation_key: str,
        author: str | None,
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
        from langfuse import propagate_attributes

        labels = {"audience": audience, "profile": profile, "channel": channel}
        tags = [clip(f"{name}:{value}") for name, value in labels.items()]
        trace_id = self._client.create_trace_id()
        session_id, user_id = turn_owner(conversation_key, author)
        with (
            propagate_attributes(
                session_id=session_id,
                user_id=user_id,
                tags=tags,
                trace_name=TRACE_NAME,
                metadata={k: clip(v) for k, v in {**labels, "chat_model": model}.items()},
            ),
            self._client.start_as_current_observation(
                name=TRACE_NAME,
                as_type="span",
                trace_context={"trace_id": trace_id},
                input={
                    "text": clip(text, self.settings.max_attribute_chars),
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

    def tag(self, trace_id: str, tag: str, conversation_key: str, author: str | None) -> None:
        """Add `tag` to a turn's trace after the turn (e.g. `handoff`): a span of its own
        on that trace carries it, and Langfuse merges a trace's tags."""
        with self.attached(trace_id, tag, conversation_key, author, tags=[tag]):
            pass

    @contextmanager
    def attached(
        self,
        trace_id: str | None,
        name: str,
        conversation_key: str,
        author: str | None,
        tags: Sequence[str] = (),
    ) -> Iterator[TurnTrace | None]:
        """Work done for a turn apart from its agent run (a handoff's card summary and
        drafted reply, a tag): a span `name` on the turn's trace, its LLM calls
        generations under it, in the turn's session and user (filters by either find
        it), so that the trace holds every call the database stores for the turn. None
        when tracing is off or the turn has no trace."""
        if self._client is None or trace_id is None:
            yield None
            return
        from langfuse import propagate_attributes

        session_id, user_id = turn_owner(conversation_key, author)
        with (
            propagate_attributes(
                session_id=session_id,
                user_id=user_id,
                tags=[clip(tag) for tag in tags],
                trace_name=TRACE_NAME,
            ),
            self._client.start_as_current_observation(
                name=name, as_type="span", trace_context={"trace_id": trace_id}
            ) as span,
        ):
            yield TurnTrace(self, span, trace_id)

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
