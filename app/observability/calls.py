"""The one collector of a turn's LLM calls (any purpose: agent, summary, expert): each call's
`UsageRecord` is made here once, as the call finishes, and handed to metrics, to the turn's
Langfuse trace and (through `records`) to the database."""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from app.observability import metrics
from app.observability.pricing import billed_model, cost_parts, price_for
from app.observability.simulator import PrefixCacheSimulator
from app.observability.usage import UsageRecord, normalize_usage
from app.settings import ObservabilitySettings

PURPOSE_KEY = "supportbot_purpose"  # run metadata key: "agent" (default), "summary", "expert"


class CallSink(Protocol):
    """Where a call's observation goes (the turn's Langfuse trace): opened when the call
    starts, closed with its record."""

    def call_started(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        *,
        name: str,
        model: str,
        purpose: str,
        messages: list[BaseMessage],
    ) -> None: ...

    def call_ended(self, run_id: UUID, record: UsageRecord, reply: AIMessage | None) -> None: ...

    def call_failed(self, run_id: UUID, error: BaseException) -> None: ...


@dataclass
class _Started:
    at: float
    purpose: str
    model: str
    # The exact request, tokenized only if the simulator has to stand in for the provider.
    messages: list[BaseMessage]
    tools: list[dict[str, Any]] | None


EventKind = Literal["llm", "chat_model", "chain", "agent", "retriever", "retry", "custom_event"]


class InlineHandler(BaseCallbackHandler):
    """A callback handler that runs in the caller's thread (its work is a few dictionary
    operations or opening a span; in a thread pool each event cost a hop) and is sent only
    the kinds of events it `handles` (LangChain's `ignore_*` switches: tool events come
    under "agent", a chat model's start under "chat_model", every model's end under "llm")."""

    run_inline = True
    handles: frozenset[EventKind] = frozenset()

    @property
    def ignore_llm(self) -> bool:
        return "llm" not in self.handles

    @property
    def ignore_chat_model(self) -> bool:
        return "chat_model" not in self.handles

    @property
    def ignore_chain(self) -> bool:
        return "chain" not in self.handles

    @property
    def ignore_agent(self) -> bool:
        return "agent" not in self.handles

    @property
    def ignore_retriever(self) -> bool:
        return "retriever" not in self.handles

    @property
    def ignore_retry(self) -> bool:
        return "retry" not in self.handles

    @property
    def ignore_custom_event(self) -> bool:
        return "custom_event" not in self.handles


class UsageCollector(InlineHandler):
    """A LangChain callback handler that makes one record per finished chat-model call.

    `simulator` stands in for the provider's prompt cache when a call reports none;
    `clock` is its time in seconds (evals replay gaps between turns through it); `sink`
    receives every call (the turn's trace).

    It is sent model calls only: a turn's chain, agent, tool and retry events (most of
    them) are not dispatched to it.
    """

    handles = frozenset({"llm", "chat_model"})

    def __init__(
        self,
        profile: str,
        observability: ObservabilitySettings,
        simulator: PrefixCacheSimulator | None = None,
        clock: Callable[[], float] = time.time,
        sink: CallSink | None = None,
    ) -> None:
        self.profile = profile
        self._observability = observability
        self.records: list[UsageRecord] = []
        self._simulator = simulator
        self._clock = clock
        self._sink = sink
        self._started: dict[UUID, _Started] = {}

    @property
    def callbacks(self) -> list[BaseCallbackHandler]:
        """What a run's config hands LangChain: this collector, and its sink when that is a
        callback handler too (the turn's trace, which also records steps and tools)."""
        sink = self._sink
        return [self, *([sink] if isinstance(sink, BaseCallbackHandler) else [])]

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        invocation_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        metadata = metadata or {}
        model = str(metadata.get("ls_model_name") or (serialized or {}).get("name") or "unknown")
        tools = (invocation_params or {}).get("tools")
        purpose = str(metadata.get(PURPOSE_KEY, "agent"))
        self._started[run_id] = _Started(time.perf_counter(), purpose, model, messages[0], tools)
        if self._sink is not None:
            name = kwargs.get("name") or (serialized or {}).get("name") or "chat-model"
            self._sink.call_started(
                run_id,
                parent_run_id,
                name=str(name),
                model=model,
                purpose=purpose,
                messages=messages[0],
            )

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        started = self._started.pop(run_id, None)
        if started is None:  # not a chat-model run
            return
        generation = response.generations[0][0] if response.generations else None
        message = generation.message if isinstance(generation, ChatGeneration) else None
        reply = message if isinstance(message, AIMessage) else None
        record = self._record(started, reply)
        if self._observability.metrics_enabled:
            metrics.record_call(profile=self.profile, record=record)
        self.records.append(record)
        if self._sink is not None:
            self._sink.call_ended(run_id, record, reply)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        # A failed call reports no usage; it is not billed as far as we can know.
        if self._started.pop(run_id, None) is not None and self._sink is not None:
            self._sink.call_failed(run_id, error)

    def _record(self, started: _Started, reply: AIMessage | None) -> UsageRecord:
        usage, model = UsageRecord(), started.model
        if reply is not None:
            usage = normalize_usage(reply.usage_metadata, reply.response_metadata)
            model = str(reply.response_metadata.get("model_name") or model)
        if usage.cache_source == "none" and self._simulator:
            billed_as = billed_model(model, self._observability)
            outcome = self._simulator.observe_call(
                started.messages, started.tools, self._clock, billed_as
            )
            usage = usage.with_simulated_cache(outcome)
        # The served model's price, else the requested one's (a router may rename it).
        price = price_for(model, self._observability) or price_for(
            started.model, self._observability
        )
        return UsageRecord(
            input_tokens=usage.input_tokens,
            cached_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            output_tokens=usage.output_tokens,
            cache_source=usage.cache_source,
            purpose=started.purpose,
            model=model,
            latency_ms=round((time.perf_counter() - started.at) * 1000),
            cost=cost_parts(usage, price) if price else {},
        )
