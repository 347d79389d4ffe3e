"""Langfuse tracing: one trace per chat turn, one Langfuse session per conversation.

Built once from settings. With Langfuse off no client exists and a turn hands out no
callbacks, so tracing costs nothing. With it on, each turn gets the SDK's LangChain
`CallbackHandler` (langfuse 5.0.4), pinned to a fresh trace id so the turn's scores can
be sent to that trace, and extended to send our own cost with every generation:
Langfuse would otherwise price generations from its model cards, which price Gemini
cache reads through LangChain at $0.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import LLMResult
from langfuse import Langfuse, propagate_attributes
from langfuse.langchain import CallbackHandler
from opentelemetry.sdk.trace import TracerProvider

from app.observability.pricing import cost_parts, price_for
from app.observability.usage import normalize_usage
from app.settings import ObservabilitySettings, Settings

TRACE_NAME = "chat-turn"
_MAX_TRACE_ATTRIBUTE = 200  # the SDK drops longer session ids, user ids and tags


def _clip(value: str) -> str:
    return value[:_MAX_TRACE_ATTRIBUTE]


def generation_cost(
    response: LLMResult, requested_model: str, observability: ObservabilitySettings
) -> dict[str, float] | None:
    """Langfuse `cost_details` of one LLM call, or None when its model has no price."""
    generation = response.generations[-1][-1] if response.generations else None
    message = getattr(generation, "message", None)
    if not isinstance(message, AIMessage):
        return None
    metadata = message.response_metadata
    served_model = metadata.get("model_name") or metadata.get("model")
    price = (served_model and price_for(served_model, observability)) or price_for(
        requested_model, observability
    )
    if price is None:
        return None
    parts = cost_parts(normalize_usage(message.usage_metadata, metadata), price)
    return {**parts, "total": sum(parts.values())}


class CostReportingCallbackHandler(CallbackHandler):
    """The SDK's LangChain handler, plus `cost_details` from our price table."""

    def __init__(
        self,
        *,
        public_key: str,
        trace_id: str,
        default_model: str,
        observability: ObservabilitySettings,
    ) -> None:
        super().__init__(public_key=public_key, trace_context={"trace_id": trace_id})
        self._default_model = default_model
        self._observability = observability
        self._requested_models: dict[UUID, str] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        model = (metadata or {}).get("ls_model_name")
        if isinstance(model, str):
            self._requested_models[run_id] = model
        return super().on_chat_model_start(
            serialized,
            messages,
            run_id=run_id,
            parent_run_id=parent_run_id,
            tags=tags,
            metadata=metadata,
            **kwargs,
        )

    def on_llm_end(
        self,
        response: LLMResult,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> Any:
        requested_model = self._requested_models.pop(run_id, self._default_model)
        # The SDK ends the generation in on_llm_end, so the cost goes on it just before.
        # `_runs` (open observations by run id) is internal to langfuse 5.0.4, which is
        # pinned; the tracing test fails if it changes.
        generation = self._runs.get(run_id)
        cost = generation_cost(response, requested_model, self._observability)
        if generation is not None and cost is not None:
            generation.update(cost_details=cost)
        return super().on_llm_end(response, run_id=run_id, parent_run_id=parent_run_id, **kwargs)


@dataclass
class TurnTrace:
    """What one turn passes to its agent run: `callbacks` and `metadata` for the
    RunnableConfig. Empty when tracing is off."""

    callbacks: list[BaseCallbackHandler] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    trace_id: str | None = None
    _client: Langfuse | None = field(default=None, repr=False)

    def score(self, cache_hit_rate: float, context_tokens: int) -> None:
        """Scores on this turn's trace: its cache hit rate (0..1) and context size."""
        if self._client is None or self.trace_id is None:
            return
        for name, value in (
            ("cache_hit_rate", cache_hit_rate),
            ("context_tokens", float(context_tokens)),
        ):
            self._client.create_score(
                name=name, value=value, trace_id=self.trace_id, data_type="NUMERIC"
            )


class Tracer:
    def __init__(
        self, client: Langfuse | None, public_key: str | None, observability: ObservabilitySettings
    ) -> None:
        self._client = client
        self._public_key = public_key
        self._observability = observability

    @classmethod
    def disabled(cls, observability: ObservabilitySettings) -> "Tracer":
        """Sends nothing and costs nothing on the hot path."""
        return cls(None, None, observability)

    @classmethod
    def from_settings(cls, settings: Settings) -> "Tracer":
        langfuse = settings.langfuse
        if not langfuse.enabled:
            return cls.disabled(settings.observability)
        assert langfuse.public_key and langfuse.secret_key  # what `enabled` means
        client = Langfuse(
            public_key=langfuse.public_key,
            secret_key=langfuse.secret_key.get_secret_value(),
            base_url=langfuse.base_url,
            environment=langfuse.environment,
            # Our own provider: the SDK would otherwise install itself as the process-wide
            # OpenTelemetry provider and export other libraries' spans as well.
            tracer_provider=TracerProvider(),
        )
        return cls(client, langfuse.public_key, settings.observability)

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
    ) -> Iterator[TurnTrace]:
        """One chat turn = one trace; the conversation is the Langfuse session.

        Inside the block every span gets the trace attributes (session, user, tags), also
        those the handler opens from worker threads during an async run; the metadata
        carries them as well, for an agent run outside the block."""
        if self._client is None or self._public_key is None:
            yield TurnTrace()
            return
        session_id, user_id = _clip(conversation_key), _clip(author)
        tags = [_clip(f"audience:{audience}"), _clip(f"profile:{profile}")]
        tags.append(_clip(f"channel:{channel}"))
        labels = {
            "audience": _clip(audience),
            "profile": _clip(profile),
            "channel": _clip(channel),
            "chat_model": _clip(model),
        }
        trace_id = self._client.create_trace_id()
        handler = CostReportingCallbackHandler(
            public_key=self._public_key,
            trace_id=trace_id,
            default_model=model,
            observability=self._observability,
        )
        with propagate_attributes(
            session_id=session_id,
            user_id=user_id,
            tags=tags,
            trace_name=TRACE_NAME,
            metadata=labels,
        ):
            yield TurnTrace(
                callbacks=[handler],
                metadata={
                    "langfuse_session_id": session_id,
                    "langfuse_user_id": user_id,
                    "langfuse_tags": tags,
                    "langfuse_trace_name": TRACE_NAME,
                    **labels,
                },
                trace_id=trace_id,
                _client=self._client,
            )

    def feedback(self, trace_id: str, helpful: bool, comment: str | None) -> None:
        """A user's rating of a turn, as the `user_feedback` score (1 helpful, 0 not)."""
        if self._client is not None:
            self._client.create_score(
                name="user_feedback",
                value=1.0 if helpful else 0.0,
                trace_id=trace_id,
                data_type="NUMERIC",
                comment=comment,
            )

    def tag(self, trace_id: str, tag: str) -> None:
        """Add `tag` to a turn's trace after the turn (e.g. `handoff`): a span of its own
        on that trace carries it, and Langfuse merges a trace's tags."""
        if self._client is not None:
            with propagate_attributes(tags=[_clip(tag)], trace_name=TRACE_NAME):
                self._client.start_observation(trace_context={"trace_id": trace_id}, name=tag).end()

    def flush(self) -> None:
        """Send what is buffered (spans and scores); the SDK also flushes at exit."""
        if self._client is not None:
            self._client.flush()
