"""Tracing to Langfuse and what usage costs (`SUPPORTBOT_LANGFUSE__…`,
`SUPPORTBOT_OBSERVABILITY__…`)."""

import tomllib
from functools import lru_cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator

from knowledge.settings import web_address


class LangfuseSettings(BaseModel):
    """Tracing to Langfuse (docs/langfuse.md): on when both keys are set."""

    public_key: str | None = Field(None, description="Langfuse is on when both keys are set")
    secret_key: SecretStr | None = Field(None, description="the project's secret key")
    base_url: str = Field(
        "https://cloud.langfuse.com", description="Langfuse Cloud or your self-hosted Langfuse"
    )
    environment: str = Field(
        "development", description="Langfuse tracing environment, e.g. `production` (lowercase)"
    )
    release: str | None = Field(
        None,
        description="Langfuse `release` of every trace; default: the installed package's "
        "version (its metadata)",
    )
    max_attribute_chars: int = Field(
        8000, ge=200, description="longest input, output or metadata value a span carries"
    )
    export_timeout_seconds: int = Field(
        5, ge=1, description="how long one export of spans or scores to Langfuse may take"
    )
    shutdown_timeout_seconds: float = Field(
        3.0, gt=0, description="how long shutdown waits for Langfuse to take what is left"
    )

    _http_addresses = field_validator("base_url")(web_address)

    @property
    def enabled(self) -> bool:
        return bool(self.public_key and self.secret_key)


PRICES_FILE = ("observability", "prices.toml")  # inside the `app` package


@lru_cache
def packaged_prices() -> "dict[str, ObservabilitySettings.Price]":
    """The price table shipped with the package (read once; its entries are frozen)."""
    text = resources.files("app").joinpath(*PRICES_FILE).read_text(encoding="utf-8")
    entries = tomllib.loads(text).items()
    return {name: ObservabilitySettings.Price.model_validate(entry) for name, entry in entries}


class ObservabilitySettings(BaseModel):
    """Cost accounting, the prefix-cache simulator and Prometheus metrics."""

    class Price(BaseModel):
        """USD per 1M tokens of one model, with where the numbers come from."""

        model_config = {"frozen": True}

        input: float
        cached_input: float
        cache_write: float
        output: float
        source: str
        as_of: str
        # The prefix-cache simulator's rules for this model's own provider: an offline
        # model priced as this one under those rules pays these cache prices as they are.
        cache_rules: Literal["openai", "anthropic", "gemini", "block16"] | None = None

    prices: dict[str, Price] = Field(
        default_factory=lambda: dict(packaged_prices()),
        description="model name (bare, lowercase) -> price; default: the table in "
        "app/observability/prices.toml; setting it replaces the table",
    )
    price_overrides: dict[str, Price] = Field(
        default_factory=dict, description="entries added to or replacing entries of `prices`"
    )
    offline_priced_as: str = Field(
        "gemini-3.1-pro", description="the model whose prices cost the offline model's calls"
    )
    offline_helper_priced_as: str = Field(
        "gemini-3-flash",
        description="the model whose prices cost the offline summary and expert models' calls",
    )
    simulator_rules: Literal["openai", "anthropic", "gemini", "block16"] = Field(
        "gemini", description="provider cache rules the prefix-cache simulator applies"
    )
    metrics_enabled: bool = Field(True, description="record Prometheus metrics")
