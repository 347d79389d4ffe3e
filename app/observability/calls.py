"""Records every LLM call of a turn (any purpose: agent, summary, expert) as it finishes:
normalised usage, simulated cache where the provider reports none, cost, metrics."""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from app.observability import metrics
from app.observability.pricing import billed_model, cost_usd, price_for
from app.observability.simulator import PrefixCacheSimulator
from app.observability.usage import TokenUsage, normalize_usage
from app.settings import ObservabilitySettings

PURPOSE_KEY = "supportbot_purpose"  # run metadata key: "agent" (default), "summary", "expert"


@dataclass
class LLMCallRecord:
    purpose: str
    model: str
    input_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    output_tokens: int
    latency_ms: int
    cache_source: str
    cost_usd: float

    @property
    def usage(self) -> TokenUsage:
        return TokenUsage(
            self.input_tokens,
            self.cached_tokens,
            self.cache_write_tokens,
            self.output_tokens,
            self.cache_source,  # type: ignore[arg-type]
        )


@dataclass
class _Started:
    at: float
    purpose: str
    model: str
    # The exact request, tokenized only if the simulator has to stand in for the provider.
    messages: list[BaseMessage]
    tools: list[dict[str, Any]] | None


class LLMCallCollector(BaseCallbackHandler):
    """A LangChain callback handler that keeps one record per finished chat-model call.

    `simulator` stands in for the provider's prompt cache when a call reports none;
    `clock` is its time in seconds (evals replay gaps between turns through it).
    """

    def __init__(
        self,
        profile: str,
        observability: ObservabilitySettings,
        simulator: PrefixCacheSimulator | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.profile = profile
        self._observability = observability
        self.calls: list[LLMCallRecord] = []
        self._simulator = simulator
        self._clock = clock
        self._started: dict[UUID, _Started] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        invocation_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        metadata = metadata or {}
        model = metadata.get("ls_model_name") or (serialized or {}).get("name") or "unknown"
        tools = (invocation_params or {}).get("tools")
        purpose = str(metadata.get(PURPOSE_KEY, "agent"))
        self._started[run_id] = _Started(
            time.perf_counter(), purpose, str(model), messages[0], tools
        )

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        started = self._started.pop(run_id, None)
        if started is None:  # not a chat-model run
            return
        generation = response.generations[0][0] if response.generations else None
        message = generation.message if isinstance(generation, ChatGeneration) else None
        model = started.model
        usage = TokenUsage()
        if isinstance(message, AIMessage):
            usage = normalize_usage(message.usage_metadata, message.response_metadata)
            model = str(message.response_metadata.get("model_name") or model)
        if usage.cache_source == "none" and self._simulator:
            billed_as = billed_model(model, self._observability)
            outcome = self._simulator.observe_call(
                started.messages, started.tools, self._clock, billed_as
            )
            usage = usage.with_simulated_cache(outcome)
        price = price_for(model, self._observability)
        cost = cost_usd(usage, price) if price else 0.0
        if self._observability.metrics_enabled:
            metrics.record_call(
                profile=self.profile,
                model=model,
                purpose=started.purpose,
                usage=usage,
                cost_usd=cost,
            )
        self.calls.append(
            LLMCallRecord(
                purpose=started.purpose,
                model=model,
                input_tokens=usage.input_tokens,
                cached_tokens=usage.cached_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                output_tokens=usage.output_tokens,
                latency_ms=round((time.perf_counter() - started.at) * 1000),
                cache_source=usage.cache_source,
                cost_usd=cost,
            )
        )
