"""Handing a conversation to a person (`SUPPORTBOT_HANDOFF__…`)."""

from datetime import time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field, field_validator

from app.settings.home import Audience
from app.settings.names import staff_name
from knowledge.settings import web_address


class HandoffSettings(BaseModel):
    """Handing a conversation to a person (docs/handoff.md)."""

    audiences: list[Audience] = Field(
        default_factory=lambda: list[Audience](["client"]),
        description="audiences whose conversations are handed to a person when asked, after "
        "`not_found_turns` answers in a row found nothing, or `thumbs_down` 👎",
    )
    not_found_turns: int = Field(2, ge=1, description="answers in a row that found nothing")
    thumbs_down: int = Field(2, ge=1, description="👎 ratings in one conversation")
    timezone: str = Field("UTC", description="IANA time zone of the office hours")
    office_days: list[int] = Field(
        default_factory=list,
        description="weekdays staffed, Monday = 0, e.g. `[0, 1, 2, 3, 4]`; none: no office "
        "hours, and the client is told a person replies as soon as they can",
    )
    office_start: time = Field(time(9, 0), description="when a shift starts, local time")
    office_end: time = Field(time(17, 0), description="when it ends, local time")
    staff_telegram_chat_id: int | None = Field(
        None, description="Telegram chat the handoff cards are posted to, with a Claim button"
    )
    staff_telegram_users: dict[int, str] = Field(
        default_factory=dict,
        description="Telegram user id -> staff name (as the widget signs them in): who may "
        "claim a handoff with the card's button, and as whom; an administrator of the staff "
        "chat not listed claims as `telegram:<user id>`, anyone else is refused",
    )
    transcript_base_url: str = Field(
        "", description="prefix of the transcript link on a card, e.g. https://support.example.com"
    )
    draft_timeout_seconds: float = Field(
        60.0,
        ge=0,
        description="how long the bot may take to draft a reply for the card (the staff "
        "chat's card waits for it); past it, or on 0, the card says there is no draft",
    )

    _http_addresses = field_validator("transcript_base_url")(web_address)

    @field_validator("staff_telegram_users")
    @classmethod
    def _staff_names(cls, value: dict[int, str]) -> dict[int, str]:
        return {user_id: staff_name(name) for user_id, name in value.items()}

    @field_validator("timezone")
    @classmethod
    def _a_time_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as error:
            raise ValueError(f"unknown time zone {value!r}") from error
        return value
