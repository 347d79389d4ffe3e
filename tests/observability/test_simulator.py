"""The prefix-cache simulator on hand-computed cases."""

import itertools
import random
import threading
from dataclasses import replace
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from app.observability.simulator import (
    ANTHROPIC,
    BLOCK16,
    GEMINI,
    OPENAI,
    CacheOutcome,
    CacheRules,
    PrefixCacheSimulator,
    encode_request,
    request_tokens,
)
from knowledge.tokens import encode


def tokens(length: int, *, change_at: int | None = None) -> list[int]:
    """`length` distinct tokens; with `change_at`, one token differs there."""
    sequence = list(range(length))
    if change_at is not None:
        sequence[change_at] = -1
    return sequence


def test_openai_caches_from_1024_tokens_in_128_token_steps() -> None:
    cache = PrefixCacheSimulator(OPENAI)

    # 2000 tokens: 1024 + 7 * 128 = 1920 are cacheable.
    assert cache.observe(tokens(2000), at=0) == CacheOutcome(cached_tokens=0, written_tokens=1920)
    # The same 2000 plus 500: reads 1920, stores 1024 + 11 * 128 = 2432.
    assert cache.observe(tokens(2500), at=60) == CacheOutcome(1920, 512)
    # A change at token 1500 leaves a 1500-token match: 1024 + 3 * 128 = 1408 are read.
    assert cache.observe(tokens(2500, change_at=1500), at=120) == CacheOutcome(1408, 1024)


def test_openai_never_caches_a_short_prompt() -> None:
    cache = PrefixCacheSimulator(OPENAI)

    assert cache.observe(tokens(1000), at=0) == CacheOutcome(0, 0)
    assert cache.observe(tokens(1000), at=1) == CacheOutcome(0, 0)


def test_a_prefix_expires_ttl_seconds_after_its_last_use() -> None:
    cache = PrefixCacheSimulator(OPENAI)
    cache.observe(tokens(2000), at=0)

    assert cache.observe(tokens(2000), at=300).cached_tokens == 1920  # used again: refreshed
    assert cache.observe(tokens(2000), at=600).cached_tokens == 1920
    assert cache.observe(tokens(2000), at=901).cached_tokens == 0  # 301 s idle


def test_a_branch_does_not_evict_the_prefix_it_branched_from() -> None:
    cache = PrefixCacheSimulator(OPENAI)
    cache.observe(tokens(3000), at=0)  # stores 1024 + 15 * 128 = 2944

    branch = cache.observe(tokens(3000, change_at=2000), at=1)
    back_on_the_trunk = cache.observe(tokens(3100), at=2)

    assert branch == CacheOutcome(1920, 1024)
    assert back_on_the_trunk == CacheOutcome(2944, 128)


def test_anthropic_caches_only_at_breakpoints_and_bills_the_writes() -> None:
    cache = PrefixCacheSimulator(ANTHROPIC)

    assert cache.observe(tokens(3000), at=0, breakpoints=(2000, 3000)) == CacheOutcome(0, 3000)
    # The conversation grows by 200 tokens, breakpoint at the end: reads 3000, writes 200.
    assert cache.observe(tokens(3200), at=10, breakpoints=(3200,)) == CacheOutcome(3000, 200)
    # A change at 2500: the longest written prefix it repeats is the 2000-token one.
    diverged = tokens(3200, change_at=2500)
    assert cache.observe(diverged, at=20, breakpoints=(3200,)) == CacheOutcome(2000, 1200)


def test_anthropic_without_breakpoints_or_below_the_minimum_caches_nothing() -> None:
    cache = PrefixCacheSimulator(ANTHROPIC)
    cache.observe(tokens(3000), at=0, breakpoints=(3000,))

    assert cache.observe(tokens(3000), at=1) == CacheOutcome(0, 0)
    assert cache.observe(tokens(3000), at=2, breakpoints=(1000,)) == CacheOutcome(0, 0)


def test_anthropic_refreshes_the_prefix_it_reads() -> None:
    cache = PrefixCacheSimulator(ANTHROPIC)
    cache.observe(tokens(2000), at=0, breakpoints=(2000,))
    # Reads the 2000-token prefix at t=200 while writing a longer one.
    assert cache.observe(tokens(2500), at=200, breakpoints=(2500,)) == CacheOutcome(2000, 500)

    # 450 s after it was written but 250 s after it was read: still cached.
    diverged = tokens(2500, change_at=2200)
    assert cache.observe(diverged, at=450, breakpoints=(2400,)) == CacheOutcome(2000, 400)
    assert cache.observe(diverged, at=751, breakpoints=(2400,)) == CacheOutcome(0, 2400)


def test_minimum_prefix_depends_on_the_model() -> None:
    assert ANTHROPIC.for_model("anthropic:claude-haiku-4-5-20251001").min_prefix_tokens == 4096
    assert ANTHROPIC.for_model("claude-sonnet-4-6").min_prefix_tokens == 1024
    assert GEMINI.for_model("openrouter:google/gemini-3-flash-preview").min_prefix_tokens == 1024
    assert GEMINI.for_model("google/gemini-3.1-pro-preview").min_prefix_tokens == 4096

    haiku = PrefixCacheSimulator(ANTHROPIC.for_model("claude-haiku-4-5"))
    assert haiku.observe(tokens(3000), at=0, breakpoints=(3000,)) == CacheOutcome(0, 0)


def test_one_cache_applies_each_calls_model_minimum() -> None:
    cache = PrefixCacheSimulator(GEMINI)  # 4096 by default, gemini-3-flash from 1024

    assert cache.observe(tokens(3000), at=0, model="gemini-3.1-pro") == CacheOutcome(0, 0)
    assert cache.observe(tokens(3000), at=1, model="gemini-3-flash") == CacheOutcome(0, 3000)
    assert cache.observe(tokens(3100), at=2, model="google/gemini-3-flash-preview") == (
        CacheOutcome(3000, 100)
    )
    assert cache.observe(tokens(3100), at=3, model="gemini-3.1-pro") == CacheOutcome(0, 0)


def test_gemini_reads_the_exact_repeated_prefix_above_its_minimum() -> None:
    cache = PrefixCacheSimulator(GEMINI)

    assert cache.observe(tokens(3000), at=0) == CacheOutcome(0, 0)  # below 4096
    assert cache.observe(tokens(5000), at=1) == CacheOutcome(0, 5000)
    assert cache.observe(tokens(5037), at=2) == CacheOutcome(5000, 37)


def test_block_cache_serves_whole_blocks_and_never_expires() -> None:
    cache = PrefixCacheSimulator(BLOCK16)

    assert cache.observe(tokens(100), at=0) == CacheOutcome(0, 96)  # 6 blocks of 16
    assert cache.observe(tokens(110), at=10**9) == CacheOutcome(96, 0)


def test_requests_must_come_in_time_order() -> None:
    cache = PrefixCacheSimulator(OPENAI)
    cache.observe(tokens(10), at=5)

    with pytest.raises(ValueError):
        cache.observe(tokens(10), at=4)


SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_knowledge_base",
        "description": "Search the knowledge base",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}


def _conversation() -> list:
    return [
        SystemMessage("You are the support assistant."),
        HumanMessage("Anna: how do I set the VAT rate?", name="anna"),
        AIMessage(
            "",
            tool_calls=[{"name": "search_knowledge_base", "args": {"query": "VAT"}, "id": "c1"}],
        ),
        ToolMessage("Set the VAT rates under Settings → Taxes.", tool_call_id="c1"),
        AIMessage("Under Settings → Taxes [1]."),
    ]


def test_request_tokens_extend_when_the_conversation_grows() -> None:
    messages = _conversation()

    shorter = request_tokens(messages[:3], [SEARCH_TOOL])
    longer = request_tokens(messages, [SEARCH_TOOL])

    assert longer[: len(shorter)] == shorter
    assert len(longer) > len(shorter)
    assert request_tokens(messages, [SEARCH_TOOL]) == longer  # deterministic


def test_request_tokens_put_the_tools_first_then_each_message() -> None:
    messages = _conversation()[:2]

    with_tools = request_tokens(messages, [SEARCH_TOOL])
    without_tools = request_tokens(messages)

    assert without_tools == encode("<|system|>You are the support assistant.") + encode(
        "<|human|><|name:anna|>Anna: how do I set the VAT rate?"
    )
    assert with_tools[-len(without_tools) :] == without_tools
    assert len(with_tools) > len(without_tools)


def test_request_tokens_see_tool_call_arguments() -> None:
    def asking(query: str) -> list[int]:
        call = {"name": "search_knowledge_base", "args": {"query": query}, "id": "c1"}
        return request_tokens([HumanMessage("q"), AIMessage("", tool_calls=[call])])

    assert asking("VAT") != asking("invoices")


def _marked(text: str) -> list[str | dict[str, Any]]:
    return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]


def test_breakpoints_are_where_marked_blocks_end_and_marks_change_no_token() -> None:
    system = SystemMessage(
        content=[{"type": "text", "text": "You are the support assistant."}, *_marked("summary")]
    )
    question = HumanMessage("Anna: how do I set the VAT rate?")
    marked_question = HumanMessage(_marked("Anna: how do I set the VAT rate?"))

    request = encode_request([system, marked_question], [SEARCH_TOOL])
    unmarked = encode_request([system, question], [SEARCH_TOOL])

    assert request.tokens == unmarked.tokens == request_tokens([system, question], [SEARCH_TOOL])
    summary_end = len(encode_request([system], [SEARCH_TOOL]).tokens)
    assert request.breakpoints == [summary_end, len(request.tokens)]
    assert unmarked.breakpoints == [summary_end]


def test_observe_call_reads_the_requests_breakpoints() -> None:
    filler = ToolMessage("VAT " * 1500, tool_call_id="c1")
    call = {"name": "search_knowledge_base", "args": {"query": "VAT"}, "id": "c1"}
    first = [HumanMessage("Anna: VAT?"), AIMessage("", tool_calls=[call]), filler]
    second = [*first, AIMessage("Under Settings."), HumanMessage("Anna: and invoices?")]
    anthropic = PrefixCacheSimulator(ANTHROPIC)

    unmarked = anthropic.observe_call(first, None, at=0)
    written = anthropic.observe_call(
        [*first[:-1], filler.model_copy(update={"content": _marked(filler.text)})], None, at=1
    )
    read = anthropic.observe_call(
        [*second[:-1], HumanMessage(_marked(second[-1].text))], None, at=2
    )

    assert unmarked == CacheOutcome(0, 0)  # no breakpoint: Anthropic caches nothing
    assert written.cached_tokens == 0 and written.written_tokens == len(request_tokens(first))
    assert read.cached_tokens == len(request_tokens(first))
    assert read.written_tokens == len(request_tokens(second)) - read.cached_tokens


def test_an_image_counts_by_its_digest_not_its_encoding() -> None:
    def with_image(data: str) -> list[int]:
        image = {"type": "image", "base64": data, "mime_type": "image/png"}
        return request_tokens([HumanMessage(content=[{"type": "text", "text": "see"}, image])])

    first, second = with_image("A" * 50_000), with_image("B" * 50_000)

    assert len(first) < 100
    assert first != second


class AllPairsCache:
    """The simulator's rules by brute force: every cached prefix compared with every
    request. The radix tree must give the same outcomes."""

    def __init__(self, rules: CacheRules) -> None:
        self.rules = rules
        self.entries: dict[tuple[int, ...], float] = {}  # cached prefix -> last used at

    def observe(
        self, request: tuple[int, ...], at: float, breakpoints: tuple[int, ...]
    ) -> CacheOutcome:
        ttl = self.rules.ttl_seconds
        self.entries = {p: t for p, t in self.entries.items() if ttl is None or at - t <= ttl}
        if self.rules.explicit_breakpoints:
            ends = sorted(
                {e for e in breakpoints if self.rules.min_prefix_tokens <= e <= len(request)}
            )
            if not ends:
                return CacheOutcome(0, 0)
            hit = max(
                (p for p in self.entries if len(p) <= ends[-1] and request[: len(p)] == p),
                key=len,
                default=(),
            )
            for end in (*ends, len(hit)):
                self.entries[request[:end]] = at
            self.entries.pop((), None)
            return CacheOutcome(len(hit), ends[-1] - len(hit))

        def common(prefix: tuple[int, ...]) -> int:
            return next(
                (i for i, (a, b) in enumerate(zip(prefix, request, strict=False)) if a != b),
                min(len(prefix), len(request)),
            )

        cached = self.rules.cacheable_length(max(map(common, self.entries), default=0))
        stored = self.rules.cacheable_length(len(request))
        if stored:
            self.entries[request[:stored]] = at
        return CacheOutcome(cached, max(0, stored - cached))


@pytest.mark.parametrize("rules", [OPENAI, ANTHROPIC, GEMINI, BLOCK16], ids=lambda r: r.name)
def test_the_shared_tree_serves_what_comparing_every_prefix_serves(rules: CacheRules) -> None:
    # Small rules so that short random conversations hit, branch, expire and share prefixes.
    rules = replace(
        rules,
        min_prefix_tokens=rules.min_prefix_tokens // 64,
        granularity=max(1, rules.granularity // 32),
    )
    rules = replace(rules, ttl_seconds=rules.ttl_seconds and 30)
    randomness = random.Random(15)
    shared = [randomness.randrange(5) for _ in range(40)]  # tools and system prompt
    histories = [list(shared) for _ in range(6)]
    tree, reference = PrefixCacheSimulator(rules), AllPairsCache(rules)
    at = 0.0
    for _ in range(600):
        history = randomness.choice(histories)
        action = randomness.random()
        if action < 0.15:
            del history[
                randomness.randrange(len(shared), len(history) + 1) :
            ]  # trimmed or summarised
        history += [randomness.randrange(5) for _ in range(randomness.randrange(1, 12))]
        request = tuple(history)
        breakpoints = tuple(randomness.sample(range(1, len(request) + 1), k=min(3, len(request))))
        at += randomness.choice((0, 1, 5, 20))
        assert tree.observe(request, at, breakpoints) == reference.observe(request, at, breakpoints)


def test_beyond_its_capacity_the_least_recently_used_prefix_goes() -> None:
    cache = PrefixCacheSimulator(BLOCK16, max_tokens=100)
    cache.observe(tokens(64), at=0)
    cache.observe([7, *tokens(63)], at=1)  # a second conversation: 128 tokens stored in all

    assert cache.stored_tokens <= 100
    assert cache.observe([7, *tokens(63)], at=2).cached_tokens == 64  # used last: kept
    assert cache.observe(tokens(64), at=3).cached_tokens == 0  # the oldest: evicted


def test_concurrent_callers_with_a_clock_are_served_in_time_order() -> None:
    cache = PrefixCacheSimulator(OPENAI)
    ticks = itertools.count()
    outcomes: list[CacheOutcome] = []

    def send() -> None:
        for _ in range(50):
            # The clock is read once the cache is free: a caller that read it earlier
            # and then waited would be out of order.
            outcomes.append(cache.observe(tokens(2000), lambda: next(ticks) / 1000))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(outcomes) == 400
    assert (
        sorted(outcomes, key=lambda o: o.cached_tokens)
        == [CacheOutcome(0, 1920)] + [CacheOutcome(1920, 0)] * 399
    )
