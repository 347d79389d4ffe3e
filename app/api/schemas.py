"""The HTTP API's request and response bodies."""

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    computed_field,
)

from app.chat.text import normalize_text
from app.observability.usage import UsageTotals

# What people type: cleaned and checked by the rules every way in shares (app/chat/text.py).
Text = Annotated[str, AfterValidator(normalize_text)]
# SQLite hands back naive datetimes; everything the service stores is UTC.
UtcDatetime = Annotated[
    AwareDatetime,
    BeforeValidator(
        lambda value: (
            value.replace(tzinfo=UTC)
            if isinstance(value, datetime) and value.tzinfo is None
            else value
        )
    ),
]


class MessageIn(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"audience": "client", "author": "Ann", "text": "How do I send an invoice?"}
            ]
        }
    )

    audience: Literal["staff", "client"] = Field(description="who is asking; picks the profile")
    author: Text = Field(min_length=1, max_length=255, description="display name of the writer")
    text: Text = Field(
        description="the message: controls removed, NFC; empty, invisible-only or over the "
        "configured limit is refused"
    )


class FeedbackIn(BaseModel):
    rating: Literal["up", "down"]
    comment: Text | None = Field(None, max_length=2000)
    author: Text | None = Field(None, max_length=255, description="who rates, if not signed in")


class CitationOut(BaseModel):
    title: str
    source: str = Field(description="a URL, or a path inside the knowledge base")
    heading: str = Field(description="the passage's section path")
    excerpt: str = Field(description="the start of the cited passage")


class UsageOut(BaseModel):
    """LLM usage summed over calls: a view of the calls' usage records."""

    llm_calls: int
    input_tokens: int = Field(description="all input tokens, cached ones included")
    cached_tokens: int = Field(description="input tokens read from the prompt cache")
    cache_write_tokens: int = Field(0, description="input tokens written to the prompt cache")
    output_tokens: int
    cost_usd: float

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0

    @classmethod
    def of(cls, totals: UsageTotals) -> "UsageOut":
        return cls.model_validate(asdict(totals))


class ReplyOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "conversation_key": "demo",
                    "turn": 1,
                    "profile": "client",
                    "text": "Open Sales → Invoices → New invoice …",
                    "citations": [
                        {"title": "Creating an invoice", "source": "en/create-invoice.md"}
                    ],
                    "usage": {
                        "llm_calls": 2,
                        "input_tokens": 1480,
                        "cached_tokens": 0,
                        "output_tokens": 120,
                        "cost_usd": 0.0,
                    },
                }
            ]
        }
    )

    conversation_key: str
    turn: int
    profile: str
    text: str
    citations: list[CitationOut]
    usage: UsageOut


class MessageOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    seq: int
    turn: int
    role: str
    author: str | None
    content: str
    tool_calls: list[dict[str, Any]] | None
    tool_name: str | None
    context_state: str
    created_at: UtcDatetime
    citations: list[CitationOut] = Field(
        default_factory=list, description="for an answer: the passages its turn retrieved"
    )


class ConversationOut(BaseModel):
    key: str
    channel: str
    audience: str
    profile: str
    messages: list[MessageOut]


class UsageReportOut(BaseModel):
    conversation_key: str
    by_purpose: dict[str, UsageOut]


class FeedbackOut(BaseModel):
    stored: bool


class WhoAmIOut(BaseModel):
    name: str | None = Field(description="the staff member's name")


class ErrorOut(BaseModel):
    detail: str = Field(description="what went wrong, for a person to read")
