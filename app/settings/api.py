"""Who may call `/v1` and how much (`SUPPORTBOT_API__…`)."""

import ipaddress
import itertools
import re
from typing import Any
from urllib.parse import urlsplit

import limits
from limits.aio.storage import MemoryStorage, RedisStorage
from limits.storage import SCHEMES
from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from app.settings.names import CONVERSATION_KEY_PATTERN, MIN_CREDENTIAL_CHARS, RESERVED_KEY_PREFIXES


class ApiKey(BaseModel):
    """One caller of the `/v1` API (your backend), limited to conversation keys that
    start with `prefix`."""

    key: SecretStr = Field(description="sent as `Authorization: Bearer <key>`")
    prefix: str = Field(
        "api:",
        description="the conversation keys this caller may read and write start with it",
    )

    @field_validator("key")
    @classmethod
    def _long_enough(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < MIN_CREDENTIAL_CHARS:
            raise ValueError(f"an API key needs at least {MIN_CREDENTIAL_CHARS} characters")
        return value

    @field_validator("prefix")
    @classmethod
    def _a_key_prefix(cls, value: str) -> str:
        if not re.fullmatch(CONVERSATION_KEY_PATTERN, value):
            raise ValueError(f"a key prefix matches {CONVERSATION_KEY_PATTERN}")
        if value.startswith(RESERVED_KEY_PREFIXES) or any(
            reserved.startswith(value) for reserved in RESERVED_KEY_PREFIXES
        ):
            raise ValueError(
                f"{value!r} overlaps {' and '.join(RESERVED_KEY_PREFIXES)}, which only the "
                "Telegram bot and the staff widget write"
            )
        return value


def shared_limits_storage(url: str) -> type[MemoryStorage] | type[RedisStorage]:
    """The `limits` storage a URI names, if the rate limits can give its hits back (those
    of a turn another limit refused) and its client is installed: Redis through coredis
    (a Valkey server too); async+memory:// counts in one process."""
    scheme = urlsplit(url).scheme
    kind = SCHEMES.get(scheme)
    if kind is MemoryStorage:
        return MemoryStorage
    if (
        scheme.startswith("async+redis")
        and isinstance(kind, type)
        and issubclass(kind, RedisStorage)
    ):
        return kind
    raise ValueError(
        f"{scheme}:// is not an async Redis `limits` storage "
        "(e.g. async+redis://user:password@redis:6379/1, for a Valkey server too)"
    )


class ApiSettings(BaseModel):
    """Who may call `/v1` and how much (docs/api.md)."""

    keys: dict[str, ApiKey] = Field(
        default_factory=dict,
        description='caller name -> {"key", "prefix"}; none: `/v1` is open to anonymous '
        "clients, which is only allowed while the server binds a loopback address and "
        "trusts no proxy",
    )
    host: str = Field(
        "127.0.0.1",
        description="the address `supportbot serve` binds (its --host wins); without API "
        "keys anything but a loopback address refuses to start",
    )
    shutdown_grace_seconds: int = Field(
        30,
        ge=0,
        description="on SIGTERM `supportbot serve` takes no new connections and lets the "
        "requests it serves (turns, streams) finish for this long, then cancels them",
    )
    max_body_bytes: int = Field(
        262_144, gt=0, description="larger request bodies are refused with 413"
    )
    conversation_rate: str = Field(
        "12/minute",
        description="turns one conversation may take over HTTP (`limits` notation, e.g. "
        "`12/minute;200/day`); more get 429 with Retry-After",
    )
    caller_rate: str = Field(
        "30/minute;1000/day",
        description="turns one caller may take over HTTP across conversations: one API key, "
        "one staff member, or one client address when anonymous (never the body's `author`)",
    )
    caller_token_budget: str = Field(
        "2000000/day",
        description="model tokens (input and output) one caller's turns may spend, in "
        "`limits` notation with tokens as the count; each turn reserves TURN_TOKEN_ESTIMATE "
        "of it before it runs and what it spent replaces that after it, so the turn that "
        "spends it may go past it; then 429 with Retry-After",
    )
    turn_token_estimate: int = Field(
        16_000,
        gt=0,
        description="model tokens a turn reserves from its caller's budget until it ends "
        "(about a turn of the client profile): concurrent turns start only on budget left "
        "for each of them",
    )
    rate_limit_storage_url: str | None = Field(
        None,
        description="the Redis the replicas count in together, as a `limits` async storage "
        "URI: `async+redis://user:password@redis:6379/1` (a Valkey server too); unset: "
        "counters in each process's memory, so each replica counts on its own",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_author_rate(cls, data: Any) -> Any:
        if isinstance(data, dict) and "author_rate" in data:
            raise ValueError(
                "author_rate is now caller_rate (SUPPORTBOT_API__CALLER_RATE): turns are "
                "counted per credential, never per author"
            )
        return data

    @field_validator("conversation_rate", "caller_rate", "caller_token_budget")
    @classmethod
    def _a_rate(cls, value: str) -> str:
        limits.parse_many(value)  # raises ValueError on anything it cannot read
        return value

    @field_validator("rate_limit_storage_url")
    @classmethod
    def _a_shared_storage(cls, value: str | None) -> str | None:
        if value is not None:
            shared_limits_storage(value)
        return value

    @model_validator(mode="after")
    def _prefixes_apart(self) -> "ApiSettings":
        prefixes = sorted((key.prefix, name) for name, key in self.keys.items())
        for (first, first_name), (second, second_name) in itertools.pairwise(prefixes):
            if second.startswith(first):
                raise ValueError(
                    f"the key prefixes of {first_name!r} and {second_name!r} overlap: "
                    "one caller could read the other's conversations"
                )
        return self

    @property
    def anonymous_allowed(self) -> bool:
        return not self.keys

    @property
    def binds_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False
