from pathlib import Path

import pytest

import app
from app.agent.expert.offline import ExtractiveExpertModel
from app.agent.memory.summarizer import ExtractiveSummaryModel
from app.agent.offline import OfflineChatModel
from app.observability.model_names import bare_model_name
from app.observability.pricing import Price, cost_parts, cost_usd, price_for
from app.observability.usage import TokenUsage
from app.settings import ObservabilitySettings

SETTINGS = ObservabilitySettings()


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("gemini-3.1-pro", "gemini-3.1-pro"),
        ("openrouter:google/gemini-3.1-pro-preview", "gemini-3.1-pro"),
        ("google/gemini-3-flash-preview:nitro", "gemini-3-flash"),
        ("google_genai:gemini-3-flash", "gemini-3-flash"),
        ("openai:gpt-5-mini", "gpt-5-mini"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
        ("anthropic:claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("openrouter:anthropic/claude-sonnet-4.6", "claude-sonnet-4-6"),  # dotted version
        ("anthropic:claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4", None),  # another model, not an older spelling
        ("claude-sonnet-4-7", None),
        ("gpt-5", None),  # not gpt-5-mini's price
        ("gemini-3.1-pro-max", None),  # an unknown sibling is not the same model
    ],
)
def test_price_for_matches_the_spellings_of_a_model(name: str, key: str | None) -> None:
    expected = SETTINGS.prices[key] if key else None
    assert price_for(name, SETTINGS) == expected


def test_every_default_price_says_where_it_comes_from() -> None:
    for name, price in SETTINGS.prices.items():
        assert price.source and price.as_of, name
        assert bare_model_name(name) == name  # keys are bare names
        assert price.cached_input < price.input <= price.cache_write


def test_cost_prices_each_kind_of_token_at_its_own_rate() -> None:
    price = Price(
        input=2.0, cached_input=0.2, cache_write=2.5, output=12.0, source="test", as_of="-"
    )
    usage = TokenUsage(
        input_tokens=12_000,
        cached_tokens=9_000,
        cache_write_tokens=2_500,
        output_tokens=150,
        cache_source="provider",
    )

    parts = cost_parts(usage, price)

    assert parts == pytest.approx(
        {
            "input": 500 * 2.0e-6,
            "input_cache_read": 9_000 * 0.2e-6,
            "input_cache_creation": 2_500 * 2.5e-6,
            "output": 150 * 12.0e-6,
        }
    )
    assert cost_usd(usage, price) == pytest.approx(0.001 + 0.0018 + 0.00625 + 0.0018)


def test_offline_model_is_priced_as_the_configured_model_under_the_simulator_rules() -> None:
    settings = ObservabilitySettings(offline_priced_as="gpt-5-mini", simulator_rules="anthropic")

    price = price_for("offline", settings)

    assert price is not None
    assert (price.input, price.output) == (0.25, 2.0)
    assert price.cached_input == pytest.approx(0.025)  # Anthropic reads: 0.1x
    assert price.cache_write == pytest.approx(0.3125)  # Anthropic writes: 1.25x
    assert "gpt-5-mini" in price.source and "anthropic" in price.source


def test_default_offline_price_is_gemini_3_1_pro() -> None:
    price = price_for("offline", SETTINGS)
    gemini = SETTINGS.prices["gemini-3.1-pro"]

    assert price is not None
    assert (price.input, price.cached_input, price.output) == pytest.approx(
        (gemini.input, gemini.cached_input, gemini.output)
    )


def test_overrides_add_and_replace_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "SUPPORTBOT_OBSERVABILITY__PRICE_OVERRIDES",
        '{"gpt-5-mini": {"input": 0.2, "cached_input": 0.02, "cache_write": 0.2, '
        '"output": 1.6, "source": "negotiated", "as_of": "2026-11-01"}, '
        '"qwen3-32b": {"input": 0.1, "cached_input": 0.1, "cache_write": 0.1, '
        '"output": 0.3, "source": "our vLLM box", "as_of": "2026-11-01"}}',
    )
    from app.settings import Settings

    settings = Settings().observability

    assert price_for("openai:gpt-5-mini", settings) == settings.price_overrides["gpt-5-mini"]
    assert price_for("Qwen/Qwen3-32B", settings) == settings.price_overrides["qwen3-32b"]
    assert price_for("claude-haiku-4-5", settings) == SETTINGS.prices["claude-haiku-4-5"]


def test_the_default_table_is_the_packaged_file_and_has_a_cheap_openai_model() -> None:
    from app.settings import PRICES_FILE, packaged_prices

    assert SETTINGS.prices == packaged_prices()
    assert Path(app.__file__).parent.joinpath(*PRICES_FILE).is_file()
    mini = price_for("openai:gpt-4.1-mini-2025-04-14", SETTINGS)
    assert mini is not None and (mini.input, mini.cached_input, mini.output) == (0.4, 0.1, 1.6)
    assert "gpt-4.1-mini" in mini.source


@pytest.mark.parametrize("helper", [ExtractiveSummaryModel, ExtractiveExpertModel])
def test_the_offline_summary_and_expert_models_are_priced_as_the_helper_model(
    helper: type[OfflineChatModel],
) -> None:
    settings = ObservabilitySettings(
        offline_priced_as="gemini-3.1-pro", offline_helper_priced_as="gpt-5-mini"
    )
    reported = helper().model_name  # the name its replies carry in response_metadata

    price = price_for(reported, settings)

    assert price is not None and (price.input, price.output) == (0.25, 2.0)
    assert "priced as gpt-5-mini" in price.source
    agent = price_for(OfflineChatModel().model_name, settings)
    assert agent is not None and agent.input == 2.0  # the agent model: gemini-3.1-pro


def test_under_its_own_providers_rules_a_model_keeps_its_own_cache_prices() -> None:
    own = ObservabilitySettings(offline_priced_as="gpt-4.1-mini", simulator_rules="openai")
    other = ObservabilitySettings(offline_priced_as="gpt-4.1-mini", simulator_rules="anthropic")

    under_openai, under_anthropic = price_for("offline", own), price_for("offline", other)

    assert under_openai is not None and under_anthropic is not None
    assert under_openai.cached_input == pytest.approx(0.1)  # OpenAI bills gpt-4.1-mini at 0.25x
    assert under_anthropic.cached_input == pytest.approx(0.04)  # Anthropic's 0.1x
    assert under_anthropic.cache_write == pytest.approx(0.5)  # and its 1.25x writes
