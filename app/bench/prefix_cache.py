"""What one prefix-cache simulator call costs as the conversations in its cache grow.

Every conversation starts with the same prefix (tool definitions and system prompt) and
has a history of its own; each measured call is the next request of one of them, picked
at random: its history grown by a short turn (short, so that rows with few conversations
do not measure much longer requests). Calls are timed in CPU time of the calling thread, so
that other processes on a busy machine do not count."""

import random
import time
from dataclasses import dataclass

from app.observability.simulator import CacheRules, PrefixCacheSimulator

# Token ids drawn from one list of int objects, as the tokenizer's segment cache shares them.
_VOCABULARY = list(range(1_000, 201_000))


@dataclass(frozen=True)
class Workload:
    shared_tokens: int = 4_000  # the same in every conversation
    own_tokens: int = 1_000  # each conversation's history before measuring
    turn_tokens: int = 20  # what each measured call adds to its conversation's history
    calls: int = 500


@dataclass(frozen=True)
class Measurement:
    conversations: int
    microseconds_per_call: float  # CPU time
    cached_share: float  # of the measured calls' tokens: shows the cache is hit
    stored_tokens: int


def measure(
    rules: CacheRules, conversations: int, workload: Workload, seed: int = 15
) -> Measurement:
    randomness = random.Random(seed)

    def draw(count: int) -> list[int]:
        return randomness.choices(_VOCABULARY, k=count)

    shared = draw(workload.shared_tokens)
    histories = [shared + draw(workload.own_tokens) for _ in range(conversations)]
    simulator = PrefixCacheSimulator(rules)
    at = 0.0
    for history in histories:  # every conversation seen within the cache's lifetime
        simulator.observe(history, at)
        at += 0.001
    elapsed, cached, sent = 0.0, 0, 0
    for _ in range(workload.calls):
        request = randomness.choice(histories)
        request += draw(workload.turn_tokens)
        at += 0.001
        started = time.thread_time()
        outcome = simulator.observe(request, at)
        elapsed += time.thread_time() - started
        cached += outcome.cached_tokens
        sent += len(request)
    return Measurement(
        conversations, elapsed / workload.calls * 1e6, cached / sent, simulator.stored_tokens
    )
