"""What the HTTP rate limits cost per request as the number of active callers and
conversations grows: sliding-window counters in `limits`' in-memory storage and in the
service's own CounterStorage (app/api/rate_limits.py).

Each active key is a caller with a conversation of its own that took one turn; each
measured request is the next turn of one of them, picked at random (its limits taken, its
tokens reserved and settled), with whatever background work the storage schedules (its
expiry pass) run to the end. Cost is the process's CPU time, worker threads included.

    .venv/bin/python -m app.bench.rate_limits [--keys 10 --keys 1000 ...]
"""

import argparse
import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from limits.aio.storage import MemoryStorage

from app.api.rate_limits import CounterStorage, GivingBackStorage, TurnLimits
from app.settings import ApiSettings

STORAGES: dict[str, Callable[[], GivingBackStorage]] = {
    "sliding window counter, limits' MemoryStorage": MemoryStorage,
    "sliding window counter, CounterStorage (now)": CounterStorage,
}
# Windows no benchmark request reaches: every measured request is let through and counted.
ROOMY = ApiSettings(
    conversation_rate="1000000/minute",
    caller_rate="1000000/minute;10000000/day",
    caller_token_budget="1000000000/day",
)


@dataclass(frozen=True)
class Row:
    limiter: str
    keys: int
    requests: int
    microseconds_per_request: float


async def _background_done() -> None:
    """Wait for the tasks a storage scheduled (its expiry pass)."""
    others = asyncio.all_tasks() - {asyncio.current_task()}
    if others:
        await asyncio.gather(*others)


async def _measure(name: str, keys: int, requests: int, seed: int) -> Row:
    limits = TurnLimits(ROOMY, metrics_enabled=False, storage=STORAGES[name]())
    for n in range(keys):  # no await yields here: any expiry pass starts once, below
        await limits.take(f"conversation:{n}", f"backend:caller{n}")
    await _background_done()
    randomness = random.Random(seed)
    started = time.process_time()
    for _ in range(requests):
        n = randomness.randrange(keys)
        reservation = await limits.take(f"conversation:{n}", f"backend:caller{n}")
        await limits.settle(reservation, "backend", 1_000)
        await _background_done()
    elapsed = time.process_time() - started
    return Row(name, keys, requests, elapsed / requests * 1e6)


def measure(name: str, keys: int, requests: int, seed: int = 31) -> Row:
    return asyncio.run(_measure(name, keys, requests, seed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, action="append", help="active keys (repeatable)")
    parser.add_argument("--requests", type=int, default=2_000, help="measured per row")
    arguments = parser.parse_args()
    counts = arguments.keys or [10, 1_000, 10_000]
    print(f"{'limiter':<48}" + "".join(f"{f'{n:,} keys':>14}" for n in counts))
    for name in STORAGES:
        rows = [measure(name, n, arguments.requests) for n in counts]
        print(f"{name:<48}" + "".join(f"{row.microseconds_per_request:>11,.0f} µs" for row in rows))
    print("CPU time per request (take + settle), process-wide, worker threads included")


if __name__ == "__main__":
    main()
