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
    StringConstraints,
    computed_field,
)

from app.api.markdown import answer_html
from app.chat.outcome import TurnOutcome
from app.chat.text import normalize_text
from app.chat.types import Citation, TurnReply
from app.db.models import Feedback, MemoryItem
from app.db.queries import ConversationSummary
from app.observability.usage import UsageTotals
from app.settings import CONVERSATION_KEY_PATTERN, KnowledgeSettings

# What people type: cleaned and checked by the rules every way in shares (app/chat/text.py).
Text = Annotated[str, AfterValidator(normalize_text)]
# A limit counts the text as sent, as the schema states it: checked before the cleaning.
Comment = Annotated[str, StringConstraints(max_length=2000), AfterValidator(normalize_text)]
AUTHOR_CHARS = 128


def _one_line(name: str) -> str:
    """A speaker's name as the model reads it before their words ("Ann: …"): one line
    of printable characters, so nobody writes a line of their own into the transcript."""
    name = name.strip()
    if not name:
        raise ValueError("the author is empty")
    if not name.isprintable():
        raise ValueError(
            "the author is one line of printable characters (no line breaks, tabs or "
            "invisible format characters)"
        )
    return name


# A speaker's display name: never an identity (credentials are), checked before anything is stored.
Author = Annotated[
    str,
    StringConstraints(min_length=1, max_length=AUTHOR_CHARS),
    AfterValidator(normalize_text),
    AfterValidator(_one_line),
]
Person = Annotated[str, StringConstraints(pattern=CONVERSATION_KEY_PATTERN)]


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
    author: Author = Field(
        description="display name of the writer, one line; it names the speaker in the "
        "transcript and never who the caller is"
    )
    text: Text = Field(
        description="the message: controls removed, NFC; empty, invisible-only or over the "
        "configured limit is refused"
    )
    person: Person | None = Field(
        None,
        description="a backend's stable id of the writer (its own user id): what they told "
        "the bot is remembered in their next conversations under this API key's prefix "
        "(docs/memory.md); without it nothing is remembered. Staff are remembered by their "
        "sign-in, so staff calls ignore it",
    )


class FeedbackIn(BaseModel):
    rating: Literal["up", "down"]
    comment: Comment | None = None
    author: Author | None = Field(None, description="who rates, if not signed in")


class CitationOut(BaseModel):
    title: str
    source: str = Field(description="a URL, or a path inside the knowledge base")
    heading: str = Field(description="the passage's section path")
    excerpt: str = Field(description="the start of the cited passage")
    excerpt_html: str = Field(description="the excerpt's Markdown as sanitized HTML")
    url: str | None = Field(
        None,
        description="the passage's public page, when its collection has a public base URL "
        "(SUPPORTBOT_KNOWLEDGE__PUBLIC_BASE_URLS)",
    )

    @classmethod
    def of(cls, citation: Citation, knowledge: KnowledgeSettings) -> "CitationOut":
        return cls(
            **asdict(citation),
            excerpt_html=answer_html(citation.excerpt),
            url=knowledge.public_url(citation.source),
        )


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
                    "outcome": "answered",
                    "handoff": None,
                }
            ]
        }
    )

    conversation_key: str
    turn: int
    profile: str
    text: str = Field(description="the answer, in Markdown")
    html: str = Field(description="the answer as sanitized HTML, to show as it is")
    citations: list[CitationOut]
    usage: UsageOut
    outcome: TurnOutcome = Field(
        description="what the turn came to: `answered` from the documentation, `not_found` "
        "(nothing relevant in it), `expert` (answered from web research), `handed_off` (a "
        "person takes the conversation over; `text` says when), `quiet` (a person has the "
        "conversation: the message is kept for them and `text` is empty), `bot_back` (the "
        "bot answers again)"
    )
    handoff: Literal["open", "claimed"] | None = Field(
        None,
        description="set while a person has the conversation after this turn: `open` "
        "(waiting for a staff member) or `claimed` (one has it); null when the bot has it",
    )
    conversation_token: str | None = Field(
        None,
        description="set on the first reply to an anonymous caller behind a proxy (as the "
        "X-Conversation-Token header too): the conversation is its alone, and every later "
        "request on it sends the token back in that header; null otherwise",
    )

    @classmethod
    def of(
        cls, reply: TurnReply, knowledge: KnowledgeSettings, conversation_token: str | None = None
    ) -> "ReplyOut":
        return cls(
            conversation_key=reply.conversation_key,
            turn=reply.turn,
            profile=reply.profile,
            text=reply.text,
            html=answer_html(reply.text),
            citations=[CitationOut.of(c, knowledge) for c in reply.citations],
            usage=UsageOut(**asdict(reply.usage)),
            outcome=reply.outcome,
            handoff=reply.handoff,
            conversation_token=conversation_token,
        )


class RatingOut(BaseModel):
    rating: Literal["up", "down"]
    comment: str | None

    @classmethod
    def of(cls, feedback: Feedback) -> "RatingOut":
        return cls(rating="up" if feedback.rating == "up" else "down", comment=feedback.comment)


class MessageOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int = Field(description="the message's recall id (a memory item's `recall_id`)")
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
    html: str | None = Field(None, description="for an answer: its content as sanitized HTML")
    feedback: RatingOut | None = Field(
        None, description="for an answer: its latest rating, if it was rated"
    )
    memory_block: str | None = Field(
        None,
        description="for a turn's user message: the memory block (what the bot remembered "
        "of these people) the turn sent the model, as sent",
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


class ProfileIn(BaseModel):
    profile: str = Field(
        min_length=1,
        max_length=64,
        examples=["staff"],
        description="a memory profile name (SUPPORTBOT_PROFILES__DEFINITIONS)",
    )


class ProfileOut(BaseModel):
    key: str
    profile: str


class WhoAmIOut(BaseModel):
    name: str | None = Field(description="the staff member's name")
    conversation_prefix: str = Field(
        description="how this staff member's widget conversation keys start",
        examples=["widget:alice:", "widget:bob+20smith:"],
    )
    example_questions: list[str] = Field(
        description="what an empty chat offers to ask (SUPPORTBOT_WIDGET__EXAMPLE_QUESTIONS)"
    )


TITLE_CHARS = 80  # of a conversation's first question, as its title in a list


class ConversationSummaryOut(BaseModel):
    key: str
    title: str = Field(description="the start of the conversation's first question")
    last_activity: UtcDatetime

    @classmethod
    def of(cls, summary: ConversationSummary) -> "ConversationSummaryOut":
        title = summary.first_question.strip()
        if len(title) > TITLE_CHARS:
            title = title[:TITLE_CHARS].rstrip() + "…"
        return cls(key=summary.key, title=title, last_activity=summary.last_activity)


class ConversationListOut(BaseModel):
    conversations: list[ConversationSummaryOut] = Field(description="the latest first")


class ErrorOut(BaseModel):
    detail: str = Field(description="what went wrong, for a person to read")


class MemoryItemOut(BaseModel):
    id: int
    text: str = Field(description="what the person said, in their words")
    kind: str = Field(description="its subject words: a newer statement of the kind replaces it")
    source_conversation: str | None = Field(description="the conversation it was said in")
    recall_id: int | None = Field(
        description="the message it was said in (recall id; a transcript message's `id`)"
    )
    created_at: UtcDatetime = Field(description="when it was said")
    last_used_at: UtcDatetime = Field(description="when an answer was last given with it")

    @classmethod
    def of(cls, item: MemoryItem) -> "MemoryItemOut":
        return cls(
            id=item.id,
            text=item.text,
            kind=item.kind,
            source_conversation=item.source_conversation,
            recall_id=item.source_message_id,
            created_at=item.created_at,
            last_used_at=item.last_used_at,
        )


class ForgottenOut(BaseModel):
    forgotten: int = Field(description="items deleted (with the statements they replaced)")


class PersonMemoryOut(BaseModel):
    scope: str = Field(
        description="whose memory: `api|<key prefix>|<person>`, `widget|<staff>`, "
        "`telegram|<chat>|<user>`, or `telegram|<chat>|*` for the chat's shared facts"
    )
    who: str = Field(
        description="the name they last wrote under in this conversation; for a Telegram "
        "chat's shared facts, `everyone in the chat`"
    )
    items: list[MemoryItemOut] = Field(description="what is remembered of them, oldest first")


class ConversationMemoryOut(BaseModel):
    conversation_key: str
    people: list[PersonMemoryOut] = Field(
        description="who wrote in it with memory on, in the order they first wrote; a "
        "Telegram chat's shared facts last"
    )
