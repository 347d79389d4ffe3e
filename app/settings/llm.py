"""The chat models (`SUPPORTBOT_LLM__…`)."""

from pydantic import BaseModel, Field, SecretStr, field_validator

from knowledge.settings import web_address


class LLMSettings(BaseModel):
    """The chat model, the cheaper models of the summaries and the expert, and retries."""

    model: str = Field(
        "offline",
        description="`offline`, any `provider:model` for init_chat_model, or a model name "
        "served at `base_url` (OpenAI-compatible)",
    )
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint, e.g. OpenRouter")
    api_key: SecretStr | None = Field(None, description="key for that endpoint or provider")
    temperature: float = Field(0.2, description="sampling temperature of real models")
    timeout_seconds: float = Field(60.0, description="seconds one model call may take")
    summary_model: str = Field("offline", description="cheaper model that folds summaries")
    expert_model: str = Field("offline", description="cheaper model for the expert subagent")
    supports_images: bool = Field(False, description="pass screenshots to the model as image parts")
    max_agent_steps: int = Field(
        8, ge=1, description="model calls per turn; then the turn ends saying it ran out of steps"
    )
    fallback_model: str | None = Field(
        None,
        description="model (same forms as `model`) that answers when `model` still fails "
        "after its retries; unset: no fallback",
    )
    max_retries: int = Field(
        2, ge=0, description="retries of a failed model call (429, 5xx, timeout, lost connection)"
    )
    retry_initial_delay_seconds: float = Field(
        1.0, ge=0, description="backoff before the first retry; doubles with each retry"
    )
    retry_max_delay_seconds: float = Field(
        30.0, ge=0, description="longest wait between retries, a provider's Retry-After included"
    )
    tool_max_retries: int = Field(
        1, ge=0, description="retries of a failing knowledge-base search or expert call"
    )

    _http_addresses = field_validator("base_url")(web_address)
