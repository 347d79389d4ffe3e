"""Prometheus metrics: tokens and cost per LLM call, latency and outcome per turn.

A dedicated registry keeps these apart from the process defaults (and readable in tests);
`exposition()` is what the `/metrics` route returns. Per-call figures are read from the
call's one `UsageRecord` (the database's `llm_calls.cache_source` says whether its cache
figures are the provider's or the simulator's). The cache hit rate is
`rate(supportbot_llm_cached_input_tokens_total) / rate(supportbot_llm_input_tokens_total)`;
the share of unanswered turns
`rate(supportbot_turns_total{status!="ok"}) / rate(supportbot_turns_total)`; the resolution
rate (turns the bot answered from the documentation, less those rated 👎)
`(rate(..._turn_outcomes_total{outcome="answered"}) - rate(...{outcome="rated_down"}))`
over all outcomes but `rated_down`.
Counters are per process: with several workers, scrape each one.
"""

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest

from app.observability.usage import UsageRecord

REGISTRY = CollectorRegistry()

_CALL_LABELS = ("profile", "model", "purpose")

LLM_CALLS = Counter("supportbot_llm_calls", "LLM calls", _CALL_LABELS, registry=REGISTRY)
INPUT_TOKENS = Counter(
    "supportbot_llm_input_tokens",
    "Input tokens sent to LLMs, cached ones included",
    _CALL_LABELS,
    registry=REGISTRY,
)
CACHED_TOKENS = Counter(
    "supportbot_llm_cached_input_tokens",
    "Input tokens served from the prompt cache",
    _CALL_LABELS,
    registry=REGISTRY,
)
CACHE_WRITE_TOKENS = Counter(
    "supportbot_llm_cache_write_input_tokens",
    "Input tokens written to the prompt cache",
    _CALL_LABELS,
    registry=REGISTRY,
)
OUTPUT_TOKENS = Counter(
    "supportbot_llm_output_tokens", "Output tokens generated", _CALL_LABELS, registry=REGISTRY
)
COST_USD = Counter(
    "supportbot_llm_cost_usd",
    "Cost of LLM calls in USD (calls of unpriced models add nothing)",
    _CALL_LABELS,
    registry=REGISTRY,
)
TURN_SECONDS = Histogram(
    "supportbot_turn_duration_seconds",
    "Time to handle one chat turn, end to end",
    ("profile", "channel"),
    buckets=(0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
    registry=REGISTRY,
)

TURNS = Counter(
    "supportbot_turns",
    "Turns ended, by status: ok, failed (model, tool or database), interrupted (deadline, "
    "shutdown, or found running with no process left)",
    ("status", "channel"),
    registry=REGISTRY,
)

TURN_OUTCOMES = Counter(
    "supportbot_turn_outcomes",
    "What turns came to (app/chat/outcome.py): answered, not_found, expert, handed_off, quiet, "
    "bot_back, failed (no answer); rated_down counts each 👎 given to an answer later",
    ("outcome", "audience", "channel"),
    registry=REGISTRY,
)

UNDELIVERED = Counter(
    "supportbot_telegram_undelivered",
    "Telegram answers (or apologies) and handoff cards given up on after the delivery "
    "patience ran out or Telegram refused them",
    registry=REGISTRY,
)


LANGFUSE_FAILURES = Counter(
    "supportbot_langfuse_export_failures",
    "Requests to Langfuse that failed (an error status or no answer in time), by signal: "
    "spans or scores; the SDK retries some of them",
    ("signal",),
    registry=REGISTRY,
)

LANGFUSE_DROPPED = Counter(
    "supportbot_langfuse_dropped",
    "Spans and scores that never reached Langfuse: spans of a failed export, and what was "
    "still undelivered when the tracer closed (shutdown waits a bounded time)",
    ("signal",),
    registry=REGISTRY,
)


# Exported at 0 from the start, so that a dashboard's rate() sees the first loss.
for _signal in ("spans", "scores"):
    LANGFUSE_FAILURES.labels(signal=_signal)
    LANGFUSE_DROPPED.labels(signal=_signal)


def record_call(*, profile: str, record: UsageRecord) -> None:
    labels = {"profile": profile, "model": record.model, "purpose": record.purpose}
    LLM_CALLS.labels(**labels).inc()
    INPUT_TOKENS.labels(**labels).inc(record.input_tokens)
    CACHED_TOKENS.labels(**labels).inc(record.cached_tokens)
    CACHE_WRITE_TOKENS.labels(**labels).inc(record.cache_write_tokens)
    OUTPUT_TOKENS.labels(**labels).inc(record.output_tokens)
    COST_USD.labels(**labels).inc(record.cost_usd)


def count_langfuse_failure(signal: str) -> None:
    LANGFUSE_FAILURES.labels(signal=signal).inc()


def count_langfuse_dropped(signal: str, items: int) -> None:
    if items > 0:
        LANGFUSE_DROPPED.labels(signal=signal).inc(items)


def observe_turn(*, profile: str, channel: str, seconds: float) -> None:
    TURN_SECONDS.labels(profile=profile, channel=channel).observe(seconds)


def count_turn(*, status: str, channel: str) -> None:
    TURNS.labels(status=status, channel=channel).inc()


def count_outcome(*, outcome: str, audience: str, channel: str) -> None:
    TURN_OUTCOMES.labels(outcome=outcome, audience=audience, channel=channel).inc()


def count_undelivered() -> None:
    UNDELIVERED.inc()


def exposition() -> tuple[bytes, str]:
    """The body and content type of a `/metrics` response."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
