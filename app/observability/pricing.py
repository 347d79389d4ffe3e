"""What an LLM call cost, from its normalised usage and the price table in settings.

The table (`SUPPORTBOT_OBSERVABILITY__PRICES` / `__PRICE_OVERRIDES`) is keyed by bare
model names; `price_for` also finds `provider:model`, router paths and dated versions.
The offline model is priced as `offline_priced_as` under the simulator's cache rules, so
evals can put a dollar figure on offline runs.
"""

from app.observability.model_names import match_model
from app.observability.simulator import RULES, CacheRules
from app.observability.usage import TokenUsage
from app.settings import ObservabilitySettings

Price = ObservabilitySettings.Price

OFFLINE_MODEL = "offline"
_PER_TOKEN = 1e-6  # prices are per 1M tokens


def price_under_rules(price: Price, rules: CacheRules) -> Price:
    """`price` with its cache reads and writes billed as `rules` bill them."""
    return price.model_copy(
        update={
            "cached_input": price.input * rules.read_multiplier,
            "cache_write": price.input * rules.write_multiplier,
            "source": f"{price.source}; cache billed by {rules.name} rules",
        }
    )


def price_for(model_name: str, settings: ObservabilitySettings) -> Price | None:
    """The price of a model, or None when the table has no entry for it."""
    table = {**settings.prices, **settings.price_overrides}
    is_offline = model_name.strip().lower() == OFFLINE_MODEL
    key = match_model(settings.offline_priced_as if is_offline else model_name, table)
    if key is None:
        return None
    if not is_offline:
        return table[key]
    offline = price_under_rules(table[key], RULES[settings.simulator_rules])
    return offline.model_copy(update={"source": f"offline model priced as {key}: {offline.source}"})


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
