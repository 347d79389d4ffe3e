"""What an LLM call cost, from its normalised usage and the price table in settings.

The table (app/observability/prices.toml, replaced by `SUPPORTBOT_OBSERVABILITY__PRICES`,
amended by `__PRICE_OVERRIDES`) is keyed by bare model names; `price_for` also finds
`provider:model`, router paths and dated versions. The offline models stand in for real
ones: the agent model is priced as `offline_priced_as`, the summary and expert models as
`offline_helper_priced_as`, their cache reads and writes as the simulator's rules bill
them, so evals and an offline service can put a dollar figure on their calls.
"""

from app.observability.model_names import OFFLINE_HELPER_MODELS, OFFLINE_MODEL, match_model
from app.observability.simulator import RULES, CacheRules
from app.observability.usage import TokenUsage
from app.settings import ObservabilitySettings

Price = ObservabilitySettings.Price

_PER_TOKEN = 1e-6  # prices are per 1M tokens


def price_under_rules(price: Price, rules: CacheRules) -> Price:
    """`price` with its cache reads and writes billed as `rules` bill them; under its own
    provider's rules, the price as the table has it (gpt-4.1-mini reads at 0.25x, not 0.1x)."""
    if price.cache_rules == rules.name:
        return price
    return price.model_copy(
        update={
            "cached_input": price.input * rules.read_multiplier,
            "cache_write": price.input * rules.write_multiplier,
            "source": f"{price.source}; cache billed by {rules.name} rules",
        }
    )


def billed_model(model_name: str, settings: ObservabilitySettings) -> str:
    """The model a call is billed (and its cache simulated) as: an offline model's
    stand-in, else the model itself."""
    name = model_name.strip().lower()
    if name == OFFLINE_MODEL:
        return settings.offline_priced_as
    if name in OFFLINE_HELPER_MODELS:
        return settings.offline_helper_priced_as
    return model_name


def price_for(model_name: str, settings: ObservabilitySettings) -> Price | None:
    """The price of a model, or None when the table has no entry for it."""
    table = {**settings.prices, **settings.price_overrides}
    stand_in = billed_model(model_name, settings)
    key = match_model(stand_in, table)
    if key is None:
        return None
    if stand_in == model_name:
        return table[key]
    offline = price_under_rules(table[key], RULES[settings.simulator_rules])
    source = f"{model_name.strip()} model priced as {key}: {offline.source}"
    return offline.model_copy(update={"source": source})


def cost_parts(usage: TokenUsage, price: Price) -> dict[str, float]:
    """USD per kind of token, keyed as Langfuse names the usage kinds."""
    return {
        "input": usage.uncached_input_tokens * price.input * _PER_TOKEN,
        "input_cache_read": usage.cached_tokens * price.cached_input * _PER_TOKEN,
        "input_cache_creation": usage.cache_write_tokens * price.cache_write * _PER_TOKEN,
        "output": usage.output_tokens * price.output * _PER_TOKEN,
    }


def cost_usd(usage: TokenUsage, price: Price) -> float:
    return sum(cost_parts(usage, price).values())
