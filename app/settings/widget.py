"""The staff widget (`SUPPORTBOT_WIDGET__…`)."""

import ipaddress
import re
from typing import Any

from pydantic import BaseModel, Field, SecretStr, field_validator

from app.settings.names import MIN_CREDENTIAL_CHARS, staff_name


class WidgetSettings(BaseModel):
    """The staff widget and who may sign in to it (staff credentials also serve the API)."""

    staff_tokens: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="staff name -> bearer token of the widget and API (at least 16 "
        "characters); names are taken in lower case",
    )
    trusted_user_header: str | None = Field(
        None,
        description="header set by the company's SSO reverse proxy with the staff user's "
        "name (e.g. X-Forwarded-User); believed only from `trusted_proxies`, and only once "
        "per request",
    )
    trusted_proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = Field(
        default_factory=list,
        description="addresses or networks (CIDR) of the SSO proxy: only requests from them "
        "may sign in with `trusted_user_header`; the header from any other address is "
        "ignored and logged. Needs `SUPPORTBOT_API__KEYS` (an open API is refused behind it)",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="origins of the pages that call the API from a browser (CORS), and "
        "that may send it requests that change something (cross-site requests from other "
        "origins are refused)",
    )
    frame_ancestors: list[str] = Field(
        default_factory=list,
        description="origins of the pages that show the widget in a frame (the embed "
        "script's), e.g. https://crm.example.com; empty: no page may frame it "
        "(`frame-ancestors 'none'`)",
    )

    @field_validator("frame_ancestors")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        for origin in value:
            if not re.fullmatch(r"https?://[A-Za-z0-9.*-]+(:(\d+|\*))?", origin):
                raise ValueError(f"{origin!r} is not an origin such as https://crm.example.com")
        return value

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _networks(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [ipaddress.ip_network(str(v), strict=False) for v in value]
        return value

    @field_validator("staff_tokens")
    @classmethod
    def _staff_names(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for name, token in value.items():
            if len(token.get_secret_value()) < MIN_CREDENTIAL_CHARS:
                raise ValueError(
                    f"the staff token of {name!r} needs at least {MIN_CREDENTIAL_CHARS} "
                    "characters (staff read every conversation)"
                )
        named = {staff_name(name): token for name, token in value.items()}
        if len(named) < len(value):
            raise ValueError("two staff tokens are named alike (names are taken in lower case)")
        return named

    def trusts(self, peer: str | None) -> bool:
        """Whether `peer` (a client address) is one of the trusted proxies."""
        try:
            address = ipaddress.ip_address(peer or "")
        except ValueError:
            return False
        return any(address in network for network in self.trusted_proxies)

    example_questions: list[str] = Field(
        default_factory=lambda: [
            "How do I create an invoice?",
            "How do I record a partial payment?",
            "Which bank statement formats can I import?",
        ],
        description="questions an empty chat offers to ask (fit them to your knowledge base)",
    )
