"""The one usage record of an LLM call, and the views everything else reads from it.

`UsageCollector` (app/observability/calls.py) makes one `UsageRecord` per call, once:
tokens as the provider reported them (or the prefix-cache simulator stood in), where the
cache figures come from, and the cost from the price table. The database row, the reply's
and `/usage`'s totals (`UsageTotals`), Prometheus and the Langfuse generation
(`langfuse_usage_details`, `langfuse_cost_details`) are views of that record.

LangChain's `usage_metadata` is already normalised by the provider packages:
`input_tokens` counts ALL input tokens and `input_token_details` splits out
`cache_read` and `cache_creation` (langchain-openai maps OpenAI's and OpenRouter's
`prompt_tokens_details.cached_tokens` / `cache_write_tokens` there; langchain-anthropic
adds Anthropic's separately reported `cache_read_input_tokens` and
`cache_creation_input_tokens` back into `input_tokens`). The raw provider usage in
`response_metadata` is the fallback for integrations that fill no `usage_metadata`.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from app.observability.simulator import CacheOutcome

CacheSource = Literal["provider", "simulated", "none"]

# A model whose cache numbers come from the prefix-cache simulator (the offline model)
# sets this key in its response_metadata so they are not mistaken for a provider's.
SIMULATED_CACHE_KEY = "simulated_cache"


@dataclass(frozen=True)
class UsageRecord:
    """One LLM call: its tokens, where the cache figures come from, and its cost.

    `cost` is USD per kind of token keyed as Langfuse names the usage kinds (`input`,
    `input_cache_read`, `input_cache_creation`, `output`); empty when the model has no
    price. Made without a cost (`normalize_usage`) it is the tokens alone, which is what
    the price table's `cost_parts` reads."""

    input_tokens: int = 0  # all input tokens, cache reads and writes included
    cached_tokens: int = 0  # read from the prompt cache
    cache_write_tokens: int = 0  # written to the prompt cache
    output_tokens: int = 0
    cache_source: CacheSource = "none"
    purpose: str = "agent"  # agent | summary | expert
    model: str = "unknown"  # the model that served the call
    latency_ms: int = 0
    cost: Mapping[str, float] = field(default_factory=dict)

    @property
    def uncached_input_tokens(self) -> int:
        return max(0, self.input_tokens - self.cached_tokens - self.cache_write_tokens)

    @property
    def cache_hit_rate(self) -> float:
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def priced(self) -> bool:
        return bool(self.cost)

    @property
    def cost_usd(self) -> float:
        return sum(self.cost.values())

    def with_simulated_cache(self, outcome: CacheOutcome) -> "UsageRecord":
        """This call's usage with the cache numbers a simulator replay produced."""
        return replace(
            self,
            cached_tokens=outcome.cached_tokens,
            cache_write_tokens=outcome.written_tokens,
            cache_source="simulated",
        )

    def columns(self) -> dict[str, Any]:
        """The `llm_calls` row's values."""
        return {
            "purpose": self.purpose,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "output_tokens": self.output_tokens,
            "cache_source": self.cache_source,
            "cost_usd": self.cost_usd,
            "latency_ms": self.latency_ms,
        }


# The name the price table (`cost_parts`, `cost_usd`) and the evals import: the same record.
TokenUsage = UsageRecord


@dataclass(frozen=True)
class UsageTotals:
    """Usage summed over some calls (a turn's, or a conversation's by purpose)."""

    llm_calls: int = 0
    input_tokens: int = 0  # cached tokens are part of the input tokens
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0

    @classmethod
    def of(cls, records: Iterable[UsageRecord]) -> "UsageTotals":
        records = list(records)
        return cls(
            llm_calls=len(records),
            input_tokens=sum(r.input_tokens for r in records),
            cached_tokens=sum(r.cached_tokens for r in records),
            cache_write_tokens=sum(r.cache_write_tokens for r in records),
            output_tokens=sum(r.output_tokens for r in records),
            cost_usd=sum(r.cost_usd for r in records),
        )


def langfuse_usage_details(record: UsageRecord) -> dict[str, int]:
    """The generation's `usage_details`: Langfuse's `input` is the uncached input only."""
    return {
        "input": record.uncached_input_tokens,
        "input_cache_read": record.cached_tokens,
        "input_cache_creation": record.cache_write_tokens,
        "output": record.output_tokens,
        "total": record.input_tokens + record.output_tokens,
    }


def langfuse_cost_details(record: UsageRecord) -> dict[str, float] | None:
    """The generation's `cost_details`; None for an unpriced model (Langfuse then prices
    it from its own model cards)."""
    if not record.priced:
        return None
    return {**record.cost, "total": record.cost_usd}


def _int(mapping: Mapping[str, Any] | None, key: str) -> int:
    value = (mapping or {}).get(key)
    return int(value) if isinstance(value, int | float) else 0


def normalize_usage(
    usage_metadata: Mapping[str, Any] | None,
    response_metadata: Mapping[str, Any] | None = None,
) -> UsageRecord:
    """Tokens of one LLM call from an AIMessage's `usage_metadata` and `response_metadata`."""
    response_metadata = response_metadata or {}
    simulated = bool(response_metadata.get(SIMULATED_CACHE_KEY))
    if usage_metadata and "input_tokens" in usage_metadata:
        details = usage_metadata.get("input_token_details") or {}
        reported = "cache_read" in details or "cache_creation" in details
        return UsageRecord(
            input_tokens=_int(usage_metadata, "input_tokens"),
            cached_tokens=_int(details, "cache_read"),
            cache_write_tokens=_int(details, "cache_creation"),
            output_tokens=_int(usage_metadata, "output_tokens"),
            cache_source="simulated" if simulated else "provider" if reported else "none",
        )
    raw = response_metadata.get("token_usage") or response_metadata.get("usage")
    if not isinstance(raw, Mapping):
        return UsageRecord()
    if "cache_read_input_tokens" in raw or "cache_creation_input_tokens" in raw:
        # Anthropic's raw `input_tokens` excludes what was read from or written to the cache.
        cached = _int(raw, "cache_read_input_tokens")
        written = _int(raw, "cache_creation_input_tokens")
        return UsageRecord(
            input_tokens=_int(raw, "input_tokens") + cached + written,
            cached_tokens=cached,
            cache_write_tokens=written,
            output_tokens=_int(raw, "output_tokens"),
            cache_source="provider",
        )
    # OpenAI-compatible (OpenAI, OpenRouter, vLLM): prompt_tokens include cached tokens.
    details = raw.get("prompt_tokens_details") or {}
    return UsageRecord(
        input_tokens=_int(raw, "prompt_tokens") or _int(raw, "input_tokens"),
        cached_tokens=_int(details, "cached_tokens"),
        cache_write_tokens=_int(details, "cache_write_tokens"),
        output_tokens=_int(raw, "completion_tokens") or _int(raw, "output_tokens"),
        cache_source="provider" if "cached_tokens" in details else "none",
    )
