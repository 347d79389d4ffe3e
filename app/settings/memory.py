"""People's memory across conversations (`SUPPORTBOT_MEMORY__…`)."""

from pydantic import BaseModel, Field


class PeopleMemorySettings(BaseModel):
    """What the bot remembers of a person from one conversation to the next (app/memory;
    guide: docs/memory.md, "Memory across conversations")."""

    audiences: list[str] = Field(
        ["staff", "client"],
        description="the audiences whose people are remembered; `[]` turns memory off",
    )
    retention_days: int = Field(
        180, gt=0, description="an item not used for this many days is deleted"
    )
    max_items: int = Field(
        40, gt=0, description="items kept per person (or Telegram chat); the oldest go first"
    )
    max_item_chars: int = Field(
        500,
        gt=0,
        description='the longest item kept: a longer "remember that …" is refused (422), '
        "a longer stated fact is not kept",
    )
    max_tenant_items: int = Field(
        100_000,
        gt=0,
        description="items kept per tenant (an API key's people, the staff, a Telegram "
        'chat), replaced ones included; a full tenant\'s "remember that …" is refused (422) '
        "and its stated facts are not kept until items expire or are forgotten",
    )
    block_tokens: int = Field(
        300,
        gt=0,
        description="the memory block at the start of a new conversation holds the newest "
        "items within this many tokens",
    )
    idle_minutes: float | None = Field(
        None,
        gt=0,
        description="a remembered conversation without a turn for this long has what its "
        "people stated since its last fold written to memory (one summary-model call); "
        "unset: the prompt cache's TTL under `observability.simulator_rules` (5 minutes)",
    )
    idle_check_seconds: float = Field(
        60, ge=0, description="how often the service looks for idle conversations; 0: never"
    )
