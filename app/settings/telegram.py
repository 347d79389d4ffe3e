"""The Telegram bot (`SUPPORTBOT_TELEGRAM__…`)."""

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator

from knowledge.settings import web_address


class TelegramSettings(BaseModel):
    """The Telegram bot (docs/telegram.md): off while no token is set."""

    token: SecretStr | None = Field(None, description="from @BotFather")
    mode: Literal["polling", "webhook"] = Field(
        "polling",
        description="`polling`: `supportbot telegram run`; `webhook`: the HTTP app serves "
        "POST /telegram/webhook",
    )
    webhook_url: str | None = Field(
        None,
        description="public https URL of POST /telegram/webhook, registered with Telegram at "
        "start-up; unset: register it yourself",
    )
    webhook_secret: SecretStr | None = Field(
        None,
        description="required in webhook mode: Telegram sends it in the "
        "X-Telegram-Bot-Api-Secret-Token header (1-256 characters of A-Z, a-z, 0-9, _ and -)",
    )
    staff_chat_ids: list[int] = Field(
        default_factory=list, description="chats answered with the staff audience"
    )
    api_base_url: str = Field(
        "https://api.telegram.org/bot", description="a local Bot API server's URL, if any"
    )
    file_base_url: str = Field(
        "https://api.telegram.org/file/bot",
        description="a local Bot API server's file URL, if any",
    )
    concurrent_chats: int = Field(
        16, ge=1, description="chats served at once; one chat's messages go one at a time"
    )
    messages_per_second: float = Field(30, description="Telegram's global flood limit")
    group_messages_per_minute: float = Field(20, description="Telegram's per-group flood limit")
    flood_retries: int = Field(3, description="resends after Telegram answers RetryAfter")
    delivery_patience_seconds: float = Field(
        300.0,
        gt=0,
        description="how long an answer is resent after network errors, 5xx and 429 before "
        "it counts as undelivered",
    )
    shutdown_grace_seconds: float = Field(
        30.0,
        ge=0,
        description="on SIGTERM the bot takes no new updates and lets the turns it runs finish "
        "and deliver their answers for this long; what is still running then is answered "
        "after the next start",
    )
    group_context: Literal["addressed", "all"] = Field(
        "addressed",
        description="`addressed`: only messages to the bot are kept; `all`: the other group "
        "messages are kept too (with their author) and reach the model as context with the "
        "next question (needs privacy mode off)",
    )

    _http_addresses = field_validator("webhook_url", "api_base_url", "file_base_url")(web_address)


# Conversation keys: what a URL path segment carries without escaping, as long as any
# chat id or staff name needs (`telegram:-1001234567890:42`, `widget:ann@example.com:1`).
