"""The memory profiles and which audience gets which (`SUPPORTBOT_PROFILES__…`)."""

from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from app.agent.memory.profiles import MemoryProfile, default_profiles


class ProfilesSettings(BaseModel):
    """Memory profiles (models and defaults: app/agent/memory/profiles.py; guide:
    docs/memory.md), which one each audience gets, and the recall tool's limits."""

    by_audience: dict[str, str] = Field(
        default_factory=lambda: {"staff": "staff", "client": "client"},
        description="audience -> the memory profile its conversations get",
    )
    definitions: dict[str, MemoryProfile] = Field(
        default_factory=default_profiles,
        description="name -> profile; given values are deep-merged onto the defaults, e.g. "
        "SUPPORTBOT_PROFILES__DEFINITIONS__CLIENT__SUMMARY__KEEP_EXCHANGES=6",
    )
    recall_results: int = Field(3, gt=0, description="pieces one recall_history call returns")
    recall_token_budget: int = Field(1500, gt=0, description="tokens one recall result may take")

    @field_validator("definitions", mode="before")
    @classmethod
    def _merge_onto_defaults(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        merged = {name: p.model_dump() for name, p in default_profiles().items()}
        return _deep_merge(merged, value)

    @model_validator(mode="after")
    def _audiences_have_profiles(self) -> "ProfilesSettings":
        unknown = set(self.by_audience.values()) - set(self.definitions)
        if unknown:
            raise ValueError(f"by_audience names undefined profiles: {sorted(unknown)}")
        return self


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
