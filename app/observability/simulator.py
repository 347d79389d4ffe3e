"""A prefix-cache simulator: what a provider would have served from its prompt cache.

Where no provider reports cached tokens (the offline model, evals), replaying the exact
requests of a conversation through `PrefixCacheSimulator` with a provider's `CacheRules`
gives the cached and cache-written tokens per request. A request is a token list from
`request_tokens`, a deterministic serialisation of what the provider would receive.

The presets follow the providers' documentation (read 2026-10); numbers the providers
do not publish are marked as assumptions where they are set.
"""

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from app.observability.model_names import match_model
from app.tokens import encode


@dataclass(frozen=True)
class CacheRules:
    name: str
    min_prefix_tokens: int  # shorter prefixes are never cached
    granularity: int  # a cached prefix is min_prefix_tokens + k * granularity tokens long
    ttl_seconds: float | None  # since last use; None: never expires
    read_multiplier: float  # price of a cached token relative to an input token
    write_multiplier: float  # price of a cache-written token relative to an input token
    explicit_breakpoints: bool = False  # only prefixes ending at a breakpoint are cached
    min_prefix_by_model: Mapping[str, int] = field(default_factory=dict, hash=False)

    def for_model(self, model_name: str) -> "CacheRules":
        """These rules with the model's own minimum prefix, where the provider lists one."""
        key = match_model(model_name, self.min_prefix_by_model)
        if key is None:
            return self
        return replace(self, min_prefix_tokens=self.min_prefix_by_model[key])

    def cacheable_length(self, length: int) -> int:
        """The longest prefix of at most `length` tokens these rules can cache."""
        if length < self.min_prefix_tokens:
            return 0
        steps = (length - self.min_prefix_tokens) // self.granularity
        return self.min_prefix_tokens + steps * self.granularity


# OpenAI prompt caching: automatic from 1024 tokens, hits grow in 128-token steps, cached
# prefixes stay 5-10 minutes after last use (up to an hour off-peak): 5 minutes assumed.
# GPT-5-family cached input is billed at 0.1x; there is no write surcharge.
OPENAI = CacheRules(
    name="openai",
    min_prefix_tokens=1024,
    granularity=128,
    ttl_seconds=300,
    read_multiplier=0.1,
    write_multiplier=1.0,
)

# Anthropic: only prefixes up to a `cache_control` breakpoint are cached (automatic
# caching puts one breakpoint on the last block); writes cost 1.25x, reads 0.1x, the
# default TTL is 5 minutes refreshed on use. Minimum prefix per model from Anthropic's docs.
ANTHROPIC = CacheRules(
    name="anthropic",
    min_prefix_tokens=1024,
    granularity=1,
    ttl_seconds=300,
    read_multiplier=0.1,
    write_multiplier=1.25,
    explicit_breakpoints=True,
    min_prefix_by_model={
        "claude-haiku-4-5": 4096,
        "claude-opus-4-5": 4096,
        "claude-opus-4-6": 4096,
        "claude-3-5-haiku": 2048,
        "claude-3-haiku": 2048,
    },
)

# Gemini implicit caching (2.5 and newer): automatic, cache reads billed at 0.1x, no write
# charge. Minimum prefix per model from Google's caching page (the page has changed over
# 2026; the 3.x Pro models have stayed at 4096). Google publishes neither a granularity
# nor a TTL for implicit caching: token-exact hits and 5 minutes are assumptions.
GEMINI = CacheRules(
    name="gemini",
    min_prefix_tokens=4096,
    granularity=1,
    ttl_seconds=300,
    read_multiplier=0.1,
    write_multiplier=1.0,
    min_prefix_by_model={
        "gemini-3-flash": 1024,
        "gemini-2.5-flash": 2048,
        "gemini-2.5-pro": 2048,
    },
)

# A self-hosted vLLM-style block cache: full 16-token blocks, kept until evicted (no
# memory pressure modelled). It saves compute, not money: no price multipliers.
BLOCK16 = CacheRules(
    name="block16",
    min_prefix_tokens=16,
    granularity=16,
    ttl_seconds=None,
    read_multiplier=1.0,
    write_multiplier=1.0,
)

RULES = {rules.name: rules for rules in (OPENAI, ANTHROPIC, GEMINI, BLOCK16)}


@dataclass(frozen=True)
class CacheOutcome:
    cached_tokens: int
    written_tokens: int


def _common_prefix_length(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    # Binary search over slice comparisons: the comparisons run in C.
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class PrefixCacheSimulator:
    """One provider-side prompt cache, fed the requests in the order they were sent."""

    def __init__(self, rules: CacheRules) -> None:
        self.rules = rules
        self._entries: dict[tuple[int, ...], float] = {}  # cached prefix -> last used at
        self._last_at = float("-inf")

    def observe(
        self, tokens: Sequence[int], at: float, breakpoints: Sequence[int] = ()
    ) -> CacheOutcome:
        """Send one request at time `at` (seconds, never decreasing). `breakpoints` are
        token offsets where a prefix ends that the request marks for caching; they count
        only under rules with explicit breakpoints."""
        if at < self._last_at:
            raise ValueError(f"requests must be observed in time order ({at} < {self._last_at})")
        self._last_at = at
        self._expire(at)
        request = tuple(tokens)
        if self.rules.explicit_breakpoints:
            return self._observe_at_breakpoints(request, at, breakpoints)
        return self._observe_implicit(request, at)

    def _expire(self, at: float) -> None:
        ttl = self.rules.ttl_seconds
        if ttl is not None:
            self._entries = {p: used for p, used in self._entries.items() if at - used <= ttl}

    def _observe_implicit(self, request: tuple[int, ...], at: float) -> CacheOutcome:
        matched = max((_common_prefix_length(p, request) for p in self._entries), default=0)
        cached = self.rules.cacheable_length(matched)
        stored = self.rules.cacheable_length(len(request))
        if stored:
            prefix = request[:stored]
            # An older entry that this one extends is covered by it, and was used later.
            self._entries = {p: used for p, used in self._entries.items() if prefix[: len(p)] != p}
            self._entries[prefix] = at
        return CacheOutcome(cached_tokens=cached, written_tokens=max(0, stored - cached))

    def _observe_at_breakpoints(
        self, request: tuple[int, ...], at: float, breakpoints: Sequence[int]
    ) -> CacheOutcome:
        ends = sorted(
            {end for end in breakpoints if self.rules.min_prefix_tokens <= end <= len(request)}
        )
        if not ends:
            return CacheOutcome(cached_tokens=0, written_tokens=0)
        # A read is the longest earlier-written prefix this request repeats, up to its
        # last breakpoint.
        hit = max(
            (p for p in self._entries if len(p) <= ends[-1] and request[: len(p)] == p),
            key=len,
            default=(),
        )
        for end in ends:
            self._entries[request[:end]] = at
        if hit:
            self._entries[hit] = at
        return CacheOutcome(cached_tokens=len(hit), written_tokens=ends[-1] - len(hit))


# Above this length a string inside a non-text content block (an image's base64) is
# replaced by its digest: providers bill images by size, not by their encoding's length.
_LONG_STRING = 256


def _digest_long_strings(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _LONG_STRING:
        return "sha256:" + hashlib.sha256(value.encode()).hexdigest()
    if isinstance(value, dict):
        return {key: _digest_long_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_digest_long_strings(item) for item in value]
    return value


def _content_text(content: str | list[str | dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        else:
            parts.append(json.dumps(_digest_long_strings(block), sort_keys=True))
    return "\n".join(parts)


def _message_text(message: BaseMessage) -> str:
    header = f"<|{message.type}|>"
    if message.name:
        header += f"<|name:{message.name}|>"
    if isinstance(message, ToolMessage):
        header += f"<|call:{message.tool_call_id}|>"
    text = header + _content_text(message.content)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            text += "<|tool_call|>" + json.dumps(
                {"id": call["id"], "name": call["name"], "args": call["args"]},
                sort_keys=True,
                ensure_ascii=False,
            )
    return text


@lru_cache(maxsize=8192)
def _segment_tokens(text: str) -> tuple[int, ...]:
    # Conversations resend the same messages on every call: encode each one once.
    return tuple(encode(text))


def request_tokens(
    messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] | None = None
) -> list[int]:
    """The request as one token list, in the order providers build their cache prefix:
    tool definitions, then the messages. Each segment is encoded on its own, so a request
    that appends messages to an earlier one extends its token list exactly."""
    segments = [
        "<|tool|>" + json.dumps(tool, sort_keys=True, ensure_ascii=False) for tool in tools or ()
    ]
    segments += [_message_text(message) for message in messages]
    tokens: list[int] = []
    for segment in segments:
        tokens.extend(_segment_tokens(segment))
    return tokens
