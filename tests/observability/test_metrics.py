import pytest

from app.observability import metrics
from app.observability.usage import UsageRecord

LABELS = {"profile": "client", "model": "gemini-3.1-pro", "purpose": "agent"}
PRICED = {"input": 0.0004, "input_cache_read": 0.0002, "output": 0.00024}


def _value(name: str, labels: dict[str, str]) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def test_calls_add_tokens_and_cost_per_profile_model_and_purpose() -> None:
    before = {
        name: _value(name, LABELS)
        for name in (
            "supportbot_llm_calls_total",
            "supportbot_llm_input_tokens_total",
            "supportbot_llm_cached_input_tokens_total",
            "supportbot_llm_cache_write_input_tokens_total",
            "supportbot_llm_output_tokens_total",
            "supportbot_llm_cost_usd_total",
        )
    }

    first = UsageRecord(1200, 1000, 0, 20, "provider", "agent", "gemini-3.1-pro", cost=PRICED)
    second = UsageRecord(1500, 1200, 100, 50, "provider", "agent", "gemini-3.1-pro")  # unpriced
    metrics.record_call(profile="client", record=first)
    metrics.record_call(profile="client", record=second)

    def added(name: str) -> float:
        return _value(name, LABELS) - before[name]

    assert added("supportbot_llm_calls_total") == 2
    assert added("supportbot_llm_input_tokens_total") == 2700
    assert added("supportbot_llm_cached_input_tokens_total") == 2200
    assert added("supportbot_llm_cache_write_input_tokens_total") == 100
    assert added("supportbot_llm_output_tokens_total") == 70
    assert added("supportbot_llm_cost_usd_total") == pytest.approx(0.00084)  # unpriced: nothing


def test_turn_latency_lands_in_its_bucket() -> None:
    labels = {"profile": "staff", "channel": "widget"}
    count = "supportbot_turn_duration_seconds_count"
    le_1 = {**labels, "le": "1.0"}
    before = (_value(count, labels), _value("supportbot_turn_duration_seconds_bucket", le_1))

    metrics.observe_turn(profile="staff", channel="widget", seconds=0.7)
    metrics.observe_turn(profile="staff", channel="widget", seconds=3.0)

    assert _value(count, labels) - before[0] == 2
    assert _value("supportbot_turn_duration_seconds_bucket", le_1) - before[1] == 1


def test_exposition_is_the_prometheus_text_format() -> None:
    metrics.record_call(
        profile="client", record=UsageRecord(10, 0, 0, 1, purpose="agent", model="gemini-3.1-pro")
    )

    body, content_type = metrics.exposition()

    assert content_type.startswith("text/plain")
    assert b"# TYPE supportbot_llm_input_tokens_total counter" in body
    assert b'supportbot_llm_input_tokens_total{model="gemini-3.1-pro"' in body
