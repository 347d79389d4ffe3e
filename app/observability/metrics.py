"""Prometheus metrics: tokens and cost per LLM call, latency and outcome per turn.

A dedicated registry keeps these apart from the process defaults (and readable in tests);
`exposition()` is what the `/metrics` route returns. The cache hit rate is
`rate(supportbot_llm_cached_input_tokens_total) / rate(supportbot_llm_input_tokens_total)`;
the share of unanswered turns
`rate(supportbot_turns_total{status!="ok"}) / rate(supportbot_turns_total)`.
Counters are per process: with several workers, scrape each one.
"""

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest

from app.observability.usage import TokenUsage

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

UNDELIVERED = Counter(
    "supportbot_telegram_undelivered",
    "Telegram answers (or apologies) given up on after the delivery patience ran out or "
    "Telegram refused them",
    registry=REGISTRY,
)


def record_call(
    *, profile: str, model: str, purpose: str, usage: TokenUsage, cost_usd: float | None
) -> None:
    labels = {"profile": profile, "model": model, "purpose": purpose}
    LLM_CALLS.labels(**labels).inc()
    INPUT_TOKENS.labels(**labels).inc(usage.input_tokens)
    CACHED_TOKENS.labels(**labels).inc(usage.cached_tokens)
    OUTPUT_TOKENS.labels(**labels).inc(usage.output_tokens)
    if cost_usd is not None:
        COST_USD.labels(**labels).inc(cost_usd)


def observe_turn(*, profile: str, channel: str, seconds: float) -> None:
    TURN_SECONDS.labels(profile=profile, channel=channel).observe(seconds)


def count_turn(*, status: str, channel: str) -> None:
    TURNS.labels(status=status, channel=channel).inc()


def count_undelivered() -> None:
    UNDELIVERED.inc()


def exposition() -> tuple[bytes, str]:
    """The body and content type of a `/metrics` response."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
