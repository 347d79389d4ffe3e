"""All configuration, from environment variables `SUPPORTBOT_<GROUP>__<FIELD>` (or `.env`).

Groups: db, llm, knowledge, langfuse, observability, telegram, widget, api, expert, chat,
profiles, handoff.
Every field has an embedded default so the service runs with no configuration at all.
Relative paths (`var/qdrant`, `sqlite:///./var/supportbot.db`, a sample path) resolve
against one root, `SUPPORTBOT_HOME` (see `default_home`), never the working directory.
A package: one module per group, beside its fields, validators and descriptions; this
module assembles them into the one tree pydantic-settings reads, and docs/configuration.md
is generated from it (`supportbot docs config`).
"""

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.settings.api import ApiKey, ApiSettings, shared_limits_storage
from app.settings.chat import ChatSettings
from app.settings.db import DbSettings
from app.settings.decisions import DecisionSettings
from app.settings.expert import ExpertSettings
from app.settings.handoff import HandoffSettings
from app.settings.home import AUDIENCES, SOURCE_ROOT, Audience, _sqlite_url_under, default_home
from app.settings.llm import LLMSettings
from app.settings.memory import PeopleMemorySettings
from app.settings.names import (
    CONVERSATION_KEY_PATTERN,
    MIN_CREDENTIAL_CHARS,
    RESERVED_KEY_PREFIXES,
    STAFF_NAME_CHARS,
    staff_name,
    widget_key_prefix,
)
from app.settings.observability import (
    PRICES_FILE,
    LangfuseSettings,
    ObservabilitySettings,
    packaged_prices,
)
from app.settings.profiles import ProfilesSettings
from app.settings.telegram import TelegramSettings
from app.settings.widget import WidgetSettings
from knowledge.settings import KnowledgeSettings, web_address

# The groups and the rules they share, for `from app.settings import …`.
__all__ = [
    "AUDIENCES",
    "CONVERSATION_KEY_PATTERN",
    "MIN_CREDENTIAL_CHARS",
    "PRICES_FILE",
    "RESERVED_KEY_PREFIXES",
    "SOURCE_ROOT",
    "STAFF_NAME_CHARS",
    "ApiKey",
    "ApiSettings",
    "Audience",
    "ChatSettings",
    "DbSettings",
    "DecisionSettings",
    "ExpertSettings",
    "HandoffSettings",
    "KnowledgeSettings",
    "LLMSettings",
    "LangfuseSettings",
    "ObservabilitySettings",
    "PeopleMemorySettings",
    "ProfilesSettings",
    "Settings",
    "TelegramSettings",
    "WidgetSettings",
    "default_home",
    "environment_variables",
    "get_settings",
    "packaged_prices",
    "setting_fields",
    "shared_limits_storage",
    "staff_name",
    "web_address",
    "widget_key_prefix",
]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SUPPORTBOT_",
        env_nested_delimiter="__",
        env_file=".env",
        env_ignore_empty=True,  # compose passes unset variables as empty strings
        extra="ignore",
    )

    db: DbSettings = DbSettings()
    llm: LLMSettings = LLMSettings()
    knowledge: KnowledgeSettings = KnowledgeSettings()
    langfuse: LangfuseSettings = LangfuseSettings()
    observability: ObservabilitySettings = ObservabilitySettings()
    telegram: TelegramSettings = TelegramSettings()
    widget: WidgetSettings = WidgetSettings()
    api: ApiSettings = ApiSettings()
    chat: ChatSettings = ChatSettings()
    expert: ExpertSettings = ExpertSettings()
    profiles: ProfilesSettings = ProfilesSettings()
    handoff: HandoffSettings = HandoffSettings()
    decisions: DecisionSettings = DecisionSettings()
    memory: PeopleMemorySettings = PeopleMemorySettings()
    admin_token: SecretStr | None = Field(None, description="protects the admin endpoints")
    home: Path = Field(
        default_factory=default_home,
        description="root that relative paths in the settings resolve against; unset: the "
        "source checkout, or ~/.local/share/supportbot for an installed package",
    )

    @model_validator(mode="after")
    def _resolve_relative_paths(self) -> "Settings":
        self.home = self.home.expanduser().resolve()
        self.knowledge = self.knowledge.model_copy(
            update={
                "qdrant_path": self.home / self.knowledge.qdrant_path.expanduser(),
                "sample_path": self.home / self.knowledge.sample_path.expanduser(),
                "model_cache_dir": self.knowledge.model_cache_dir
                and self.home / self.knowledge.model_cache_dir.expanduser(),
                "ingest_roots": [
                    self.home / root.expanduser() for root in self.knowledge.ingest_roots
                ],
                "sources": [source.under(self.home) for source in self.knowledge.sources],
            }
        )
        self.db = self.db.model_copy(update={"url": _sqlite_url_under(self.home, self.db.url)})
        return self

    @model_validator(mode="after")
    def _credentials_apart(self) -> "Settings":
        staff = {token.get_secret_value() for token in self.widget.staff_tokens.values()}
        if any(key.key.get_secret_value() in staff for key in self.api.keys.values()):
            raise ValueError("an API key is also a staff token: give each its own secret")
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def setting_fields() -> list[tuple[str, str, FieldInfo]]:
    """(group, variable, field) of every setting Settings reads: SUPPORTBOT_<GROUP>__<FIELD>
    for the fields of the nested groups, SUPPORTBOT_<FIELD> (group "") for the top-level ones."""
    prefix = str(Settings.model_config.get("env_prefix", "")).upper()
    delimiter = str(Settings.model_config.get("env_nested_delimiter", "__"))
    found: list[tuple[str, str, FieldInfo]] = []
    for name, field in Settings.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found.extend(
                (name, f"{prefix}{name}{delimiter}{sub}".upper(), subfield)
                for sub, subfield in annotation.model_fields.items()
            )
        else:
            found.append(("", f"{prefix}{name}".upper(), field))
    return found


def environment_variables() -> set[str]:
    """Every variable Settings reads."""
    return {variable for _, variable, _ in setting_fields()}
