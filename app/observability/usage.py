"""One shape for the token usage every provider reports differently.

LangChain's `usage_metadata` is already normalised by the provider packages:
`input_tokens` counts ALL input tokens and `input_token_details` splits out
`cache_read` and `cache_creation` (langchain-openai maps OpenAI's and OpenRouter's
`prompt_tokens_details.cached_tokens` / `cache_write_tokens` there; langchain-anthropic
adds Anthropic's separately reported `cache_read_input_tokens` and
`cache_creation_input_tokens` back into `input_tokens`). The raw provider usage in
`response_metadata` is the fallback for integrations that fill no `usage_metadata`.
"""

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from app.observability.simulator import CacheOutcome

CacheSource = Literal["provider", "simulated", "none"]

# A model whose cache numbers come from the prefix-cache simulator (the offline model)
# sets this key in its response_metadata so they are not mistaken for a provider's.
SIMULATED_CACHE_KEY = "simulated_cache"


@dataclass(frozen=True)
class TokenUsage:
    input_tokens: int = 0  # all input tokens, cache reads and writes included
    cached_tokens: int = 0  # read from the prompt cache
    cache_write_tokens: int = 0  # written to the prompt cache
    output_tokens: int = 0
    cache_source: CacheSource = "none"

    @property
    def uncached_input_tokens(self) -> int:
        return max(0, self.input_tokens - self.cached_tokens - self.cache_write_tokens)

    @property
    def cache_hit_rate(self) -> float:
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0

    def __add__(self, other: "TokenUsage") -> "TokenUsage":
        """Sum of two calls; the source is the one that reported caching, if any."""
        source = self.cache_source if self.cache_source != "none" else other.cache_source
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_source=source,
        )

    def with_simulated_cache(self, outcome: CacheOutcome) -> "TokenUsage":
        """This call's usage with the cache numbers a simulator replay produced."""
        return replace(
            self,
            cached_tokens=outcome.cached_tokens,
            cache_write_tokens=outcome.written_tokens,
            cache_source="simulated",
        )


def _int(mapping: Mapping[str, Any] | None, key: str) -> int:
    value = (mapping or {}).get(key)
    return int(value) if isinstance(value, int | float) else 0


def normalize_usage(
    usage_metadata: Mapping[str, Any] | None,
    response_metadata: Mapping[str, Any] | None = None,
) -> TokenUsage:
    """Usage of one LLM call from an AIMessage's `usage_metadata` and `response_metadata`."""
    response_metadata = response_metadata or {}
    simulated = bool(response_metadata.get(SIMULATED_CACHE_KEY))
    if usage_metadata and "input_tokens" in usage_metadata:
        details = usage_metadata.get("input_token_details") or {}
        reported = "cache_read" in details or "cache_creation" in details
        return TokenUsage(
            input_tokens=_int(usage_metadata, "input_tokens"),
            cached_tokens=_int(details, "cache_read"),
            cache_write_tokens=_int(details, "cache_creation"),
            output_tokens=_int(usage_metadata, "output_tokens"),
            cache_source="simulated" if simulated else "provider" if reported else "none",
        )
    raw = response_metadata.get("token_usage") or response_metadata.get("usage")
    if not isinstance(raw, Mapping):
        return TokenUsage()
    if "cache_read_input_tokens" in raw or "cache_creation_input_tokens" in raw:
        # Anthropic's raw `input_tokens` excludes what was read from or written to the cache.
        cached = _int(raw, "cache_read_input_tokens")
        written = _int(raw, "cache_creation_input_tokens")
        return TokenUsage(
            input_tokens=_int(raw, "input_tokens") + cached + written,
            cached_tokens=cached,
            cache_write_tokens=written,
            output_tokens=_int(raw, "output_tokens"),
            cache_source="provider",
        )
    # OpenAI-compatible (OpenAI, OpenRouter, vLLM): prompt_tokens include cached tokens.
    details = raw.get("prompt_tokens_details") or {}
    return TokenUsage(
        input_tokens=_int(raw, "prompt_tokens") or _int(raw, "input_tokens"),
        cached_tokens=_int(details, "cached_tokens"),
        cache_write_tokens=_int(details, "cache_write_tokens"),
        output_tokens=_int(raw, "completion_tokens") or _int(raw, "output_tokens"),
        cache_source="provider" if "cached_tokens" in details else "none",
    )
