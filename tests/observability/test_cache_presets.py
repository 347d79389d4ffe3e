"""Every provider preset of the prefix-cache simulator caches a repeated prefix on the real
path: the HTTP API over the runtime, the offline model, the cache-hint middleware, the
call collector and the stored usage."""

from pathlib import Path

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from app.db.engine import sync_url
from app.db.models import LLMCall
from app.observability.simulator import RULES
from app.settings import Settings
from tests.conftest import make_client

# Questions on the sample knowledge base until the context passes 4,096 tokens, the
# largest minimum prefix of any preset's default model (each answer quotes one section).
QUESTIONS = [
    "How do I create an invoice?",
    "How do I record a partial payment?",
    "Where do I set the VAT rates?",
    "How do I create an invoice for a new customer?",
    "How do I record a payment by bank transfer?",
    "How do I import a bank statement?",
    "How do I reconcile a bank transaction?",
    "How do I issue a credit note?",
    "How do I change the invoice numbering?",
    "How do I send a payment reminder?",
    "How do I add a user to my company?",
    "Where do I see the VAT report?",
]


def play(settings: Settings, sample_index: Path, **observability: str) -> list[LLMCall]:
    settings.observability = settings.observability.model_copy(update=observability)
    with make_client(settings, sample_index) as client:
        for text in QUESTIONS:
            response = client.post(
                "/v1/conversations/presets/messages",
                json={"audience": "client", "author": "Ann", "text": text},
            )
            assert response.status_code == 200, response.text
    engine = create_engine(sync_url(settings.db.url))
    with Session(engine) as session:
        calls = list(session.scalars(select(LLMCall).order_by(LLMCall.id)))
    engine.dispose()
    return calls


@pytest.mark.parametrize("rules", sorted(RULES))
def test_each_preset_serves_a_repeated_prefix_from_the_cache(
    rules: str, settings: Settings, sample_index: Path
) -> None:
    calls = play(settings, sample_index, simulator_rules=rules)

    assert {call.cache_source for call in calls} == {"simulated"}
    cached = sum(call.cached_tokens for call in calls)
    sent = sum(call.input_tokens for call in calls)
    assert cached > 0.25 * sent, (rules, cached, sent)


def test_anthropic_rules_apply_the_minimum_prefix_of_the_model_the_offline_model_is_priced_as(
    settings: Settings, tmp_path: Path, sample_index: Path
) -> None:
    # Claude Sonnet 4.6 caches from 1,024 tokens, Claude Haiku 4.5 only from 4,096.
    sonnet = play(
        settings, sample_index, simulator_rules="anthropic", offline_priced_as="claude-sonnet-4-6"
    )
    haiku_settings = settings.model_copy(
        update={"db": settings.db.model_copy(update={"url": f"sqlite:///{tmp_path / 'h.db'}"})}
    )
    haiku = play(
        haiku_settings,
        sample_index,
        simulator_rules="anthropic",
        offline_priced_as="claude-haiku-4-5",
    )

    assert [c.input_tokens for c in sonnet] == [c.input_tokens for c in haiku]
    for sonnet_call, haiku_call in zip(sonnet, haiku, strict=True):
        if sonnet_call.input_tokens < 4096:
            assert haiku_call.cached_tokens == haiku_call.cache_write_tokens == 0
    assert sum(c.cached_tokens for c in haiku) < sum(c.cached_tokens for c in sonnet)
    assert sum(c.cached_tokens for c in haiku) > 0
