"""The HTTP API's request and response bodies."""

from dataclasses import asdict
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.db.queries import UsageTotals


class MessageIn(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"audience": "client", "author": "Ann", "text": "How do I send an invoice?"}
            ]
        }
    )

    audience: Literal["staff", "client"] = Field(description="who is asking; picks the profile")
    author: str = Field(min_length=1, max_length=255, description="display name of the writer")
    text: str = Field(description="the message; empty or over the configured limit is refused")


class FeedbackIn(BaseModel):
    rating: Literal["up", "down"]
    comment: str | None = Field(None, max_length=2000)
    author: str | None = Field(None, max_length=255, description="who rates, if not signed in")


class CitationOut(BaseModel):
    title: str
    source: str = Field(description="a URL, or a path inside the knowledge base")
    heading: str = Field(description="the passage's section path")
    excerpt: str = Field(description="the start of the cited passage")


class UsageOut(BaseModel):
    llm_calls: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    cost_usd: float


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
    created_at: datetime
    citations: list[CitationOut] = Field(
        default_factory=list, description="for an answer: the passages its turn retrieved"
    )


class ConversationOut(BaseModel):
    key: str
    channel: str
    audience: str
    profile: str
    messages: list[MessageOut]


class UsageTotalsOut(BaseModel):
    llm_calls: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    cached_share: float
    cost_usd: float

    @classmethod
    def of(cls, totals: UsageTotals) -> "UsageTotalsOut":
        return cls(**asdict(totals), cached_share=totals.cached_share)


class UsageReportOut(BaseModel):
    conversation_key: str
    by_purpose: dict[str, UsageTotalsOut]


class ErrorOut(BaseModel):
    detail: str
