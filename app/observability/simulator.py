"""A prefix-cache simulator: what a provider would have served from its prompt cache.

Where no provider reports cached tokens (the offline model, evals), replaying the exact
requests of a conversation through `PrefixCacheSimulator` with a provider's `CacheRules`
gives the cached and cache-written tokens per request. A request is a token list from
`request_tokens`, a deterministic serialisation of what the provider would receive.

The presets follow the providers' documentation (read 2026-10); numbers the providers
do not publish are marked as assumptions where they are set. One module: the providers'
rules and the simulator that applies them are read together.
"""

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from app.observability.model_names import match_model
from knowledge.tokens import encode


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

# What one simulator keeps at most: 16M token references, about 130 MB, hold the last five
# minutes of 1,000 conversations with 16K-token contexts (shared prefixes count once).
DEFAULT_MAX_TOKENS = 16_000_000


@dataclass(frozen=True)
class CacheOutcome:
    cached_tokens: int
    written_tokens: int


class _Node:
    """An edge of the radix tree and the prefix it ends: `label` are the tokens after the
    parent's prefix. Every prefix through a node was last used at `used` or earlier."""

    __slots__ = ("children", "entry_used", "label", "parent", "used")

    def __init__(self, parent: "_Node | None", label: tuple[int, ...], used: float) -> None:
        self.parent = parent
        self.label = label
        self.children: dict[int, _Node] = {}  # by the first token of their label
        self.used = used
        self.entry_used: float | None = None  # breakpoint rules: an entry ends here


def _common_length(request: tuple[int, ...], start: int, stop: int, label: tuple[int, ...]) -> int:
    """How many tokens of `label` `request[start:stop]` begins with; O(len(label)) in C."""
    length = min(len(label), stop - start)
    if request[start : start + length] == label[:length]:
        return length
    # The first difference lies in [low, high): halve that window, comparing only it.
    low, high = 0, length
    while high - low > 1:
        middle = (low + high) // 2
        if request[start + low : start + middle] == label[low:middle]:
            low = middle
        else:
            high = middle
    return low


class PrefixCacheSimulator:
    """One provider-side prompt cache, fed the requests in the order they were sent.

    The cached prefixes of all conversations share one radix tree, so a request costs
    time in its own length, not in the number of conversations, and a prefix common to
    many conversations (tools, system prompt) is stored once and served to all of them,
    as a provider serves it. Expired prefixes are dropped; beyond `max_tokens` stored
    tokens the least recently used are evicted. Safe to call from several threads.
    """

    def __init__(self, rules: CacheRules, max_tokens: int | None = DEFAULT_MAX_TOKENS) -> None:
        self.rules = rules
        self.max_tokens = max_tokens
        self._root = _Node(None, (), float("inf"))
        self._by_use: OrderedDict[_Node, None] = OrderedDict()  # least recently used first
        self._stored_tokens = 0
        self._last_at = float("-inf")
        self._lock = threading.Lock()

    @property
    def stored_tokens(self) -> int:
        """Tokens held in the cache now (a prefix shared by several requests counts once)."""
        return self._stored_tokens

    def observe(
        self,
        tokens: Sequence[int],
        at: float | Callable[[], float],
        breakpoints: Sequence[int] = (),
        model: str | None = None,
    ) -> CacheOutcome:
        """Send one request at time `at` (seconds, never decreasing), or at the time a
        clock `at` tells once this cache is free (concurrent callers stay in order).
        `breakpoints` are token offsets where a prefix ends that the request marks for
        caching; they count only under rules with explicit breakpoints. `model`: the
        model called, whose own minimum prefix applies where the rules list one."""
        request = tuple(tokens)
        rules = self.rules.for_model(model) if model else self.rules
        with self._lock:
            now = at() if callable(at) else at
            if now < self._last_at:
                raise ValueError(
                    f"requests must be observed in time order ({now} < {self._last_at})"
                )
            self._last_at = now
            self._expire(now)
            if rules.explicit_breakpoints:
                outcome = self._observe_at_breakpoints(request, now, breakpoints, rules)
            else:
                outcome = self._observe_implicit(request, now, rules)
            self._evict_beyond_capacity()
            return outcome

    def observe_call(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[dict[str, Any]] | None,
        at: float | Callable[[], float],
        model: str | None = None,
    ) -> CacheOutcome:
        """`observe` one model call as it was sent: its messages and tools, with the
        breakpoints its content blocks mark (`cache_control`, as Anthropic reads them)."""
        request = encode_request(messages, tools)
        return self.observe(request.tokens, at, request.breakpoints, model)

    def _observe_implicit(
        self, request: tuple[int, ...], at: float, rules: CacheRules
    ) -> CacheOutcome:
        stored = rules.cacheable_length(len(request))
        if not stored:
            return CacheOutcome(cached_tokens=0, written_tokens=0)
        # Tokens matched past `stored` cannot be served: the rules cache no longer prefix.
        _, matched = self._store(request, stored, at)
        cached = rules.cacheable_length(matched)
        return CacheOutcome(cached_tokens=cached, written_tokens=stored - cached)

    def _observe_at_breakpoints(
        self,
        request: tuple[int, ...],
        at: float,
        breakpoints: Sequence[int],
        rules: CacheRules,
    ) -> CacheOutcome:
        ends = sorted(
            {end for end in breakpoints if rules.min_prefix_tokens <= end <= len(request)}
        )
        if not ends:
            return CacheOutcome(cached_tokens=0, written_tokens=0)
        # A read is the longest earlier-written prefix this request repeats, up to its
        # last breakpoint; writing that breakpoint's prefix refreshes it.
        hit = self._longest_entry(request, ends[-1], at)
        for end in ends:
            self._store(request, end, at)[0].entry_used = at
        if hit:
            self._store(request, hit, at)[0].entry_used = at
        return CacheOutcome(cached_tokens=hit, written_tokens=ends[-1] - hit)

    def _longest_entry(self, request: tuple[int, ...], limit: int, at: float) -> int:
        """The length of the longest live breakpoint entry `request` repeats, at most `limit`."""
        ttl = self.rules.ttl_seconds
        node, position, longest = self._root, 0, 0
        while position < limit:
            child = node.children.get(request[position])
            if child is None or position + len(child.label) > limit:
                break
            if _common_length(request, position, limit, child.label) < len(child.label):
                break
            node, position = child, position + len(child.label)
            used = node.entry_used
            if used is not None and (ttl is None or at - used <= ttl):
                longest = position
        return longest

    def _store(self, request: tuple[int, ...], length: int, at: float) -> tuple[_Node, int]:
        """Cache `request[:length]`, used at `at`. Returns the node that ends it and how
        many of its tokens were cached before."""
        node, position = self._root, 0
        while position < length:
            child = node.children.get(request[position])
            if child is None:
                rest = request[position:length]
                if node is not self._root and not node.children and node.entry_used is None:
                    node.label += rest  # the same conversation, one call later
                else:
                    node = self._add_child(node, rest)
                self._stored_tokens += len(rest)
                self._touch(node, at)
                return node, position
            common = _common_length(request, position, length, child.label)
            if common < len(child.label):
                child = self._split(child, common)
            node, position = child, position + common
            self._touch(node, at)
        return node, length

    def _add_child(self, parent: _Node, label: tuple[int, ...]) -> _Node:
        child = _Node(parent, label, float("-inf"))
        parent.children[label[0]] = child
        return child

    def _split(self, node: _Node, length: int) -> _Node:
        """Cut `node`'s label after `length` tokens; returns the new node before the cut."""
        assert node.parent is not None
        head = _Node(node.parent, node.label[:length], node.used)
        node.parent.children[head.label[0]] = head
        node.label = node.label[length:]
        node.parent = head
        head.children[node.label[0]] = node
        return head

    def _touch(self, node: _Node, at: float) -> None:
        node.used = at
        self._by_use[node] = None
        self._by_use.move_to_end(node)

    def _expire(self, at: float) -> None:
        ttl = self.rules.ttl_seconds
        if ttl is None:
            return
        while self._by_use:
            oldest = next(iter(self._by_use))
            if at - oldest.used <= ttl:
                return
            self._drop(oldest)

    def _evict_beyond_capacity(self) -> None:
        while self.max_tokens is not None and self._stored_tokens > self.max_tokens:
            self._drop(next(iter(self._by_use)))

    def _drop(self, node: _Node) -> None:
        """Forget `node` and every prefix that extends it (none was used later)."""
        assert node.parent is not None
        del node.parent.children[node.label[0]]
        pending = [node]
        while pending:
            dropped = pending.pop()
            del self._by_use[dropped]
            self._stored_tokens -= len(dropped.label)
            pending.extend(dropped.children.values())


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


def _block_text(block: str | dict[str, Any]) -> str:
    if isinstance(block, str):
        return block
    if block.get("type") == "text":
        return str(block.get("text", ""))
    return json.dumps(_digest_long_strings(block), sort_keys=True)


def _is_breakpoint(block: str | dict[str, Any]) -> bool:
    return isinstance(block, dict) and bool(block.get("cache_control"))


def _message_segments(message: BaseMessage) -> list[tuple[str, bool]]:
    """A message as text segments, one per content block, each with whether it ends at a
    cache breakpoint. A block's segment is the same whether it is marked or not, so a
    mark moving on to a later message keeps the earlier tokens unchanged."""
    header = f"<|{message.type}|>"
    if message.name:
        header += f"<|name:{message.name}|>"
    if isinstance(message, ToolMessage):
        header += f"<|call:{message.tool_call_id}|>"
    blocks = [message.content] if isinstance(message.content, str) else message.content
    segments = [
        ("\n" * bool(index) + _block_text(block), _is_breakpoint(block))
        for index, block in enumerate(blocks)
    ] or [("", False)]
    segments[0] = (header + segments[0][0], segments[0][1])
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = "".join(
            "<|tool_call|>"
            + json.dumps(
                {"id": call["id"], "name": call["name"], "args": call["args"]},
                sort_keys=True,
                ensure_ascii=False,
            )
            for call in message.tool_calls
        )
        segments[-1] = (segments[-1][0] + calls, segments[-1][1])
    return segments


@lru_cache(maxsize=8192)
def _segment_tokens(text: str) -> tuple[int, ...]:
    # Conversations resend the same messages on every call: encode each one once.
    return tuple(encode(text))


@dataclass(frozen=True)
class EncodedRequest:
    tokens: list[int]
    breakpoints: list[int]  # token offsets where a block marked with `cache_control` ends


def encode_request(
    messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] | None = None
) -> EncodedRequest:
    """The request as one token list, in the order providers build their cache prefix:
    tool definitions, then the messages. Each segment is encoded on its own, so a request
    that appends messages to an earlier one extends its token list exactly."""
    segments = [
        ("<|tool|>" + json.dumps(tool, sort_keys=True, ensure_ascii=False), False)
        for tool in tools or ()
    ]
    for message in messages:
        segments += _message_segments(message)
    tokens: list[int] = []
    breakpoints: list[int] = []
    for text, is_breakpoint in segments:
        tokens.extend(_segment_tokens(text))
        if is_breakpoint:
            breakpoints.append(len(tokens))
    return EncodedRequest(tokens, breakpoints)


def request_tokens(
    messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] | None = None
) -> list[int]:
    """The request's tokens, as `encode_request` builds them."""
    return encode_request(messages, tools).tokens
