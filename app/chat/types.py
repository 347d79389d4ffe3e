"""What goes into a turn and what comes out of it: the request, the reply, the events a
streaming caller receives, and the errors."""

import re
from base64 import b64encode
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage

from app.observability.usage import UsageTotals

# running: the user's message is stored and the agent works; ok: answered; failed: the
# model, a tool or the database failed; interrupted: stopped by the turn's deadline, by a
# shutdown, or found running with no process left to finish it.
TurnStatus = Literal["running", "ok", "failed", "interrupted"]


class InvalidTurn(ValueError):
    """The input was refused before anything was stored."""


class UnknownProfile(ValueError):
    """No memory profile of that name is defined (settings.profiles.definitions)."""


@dataclass(frozen=True)
class ImageInput:
    data: bytes
    mime_type: str = "image/jpeg"


# `/ask` written at the start of a message (HTTP has no commands; Telegram's own handler
# takes the command off), optionally addressed to a bot by name as Telegram writes it.
_ASK_COMMAND = re.compile(r"\s*/ask(?:@\w+)?(?:\s+|$)")


def ask_command(text: str) -> tuple[bool, str]:
    """Whether the message starts with the `/ask` command, and what it asks without the
    command (a command with nothing after it stays as written)."""
    command = _ASK_COMMAND.match(text)
    if command is None:
        return False, text
    return True, text[command.end() :] or text


@dataclass(frozen=True)
class TurnRequest:
    channel: str  # "api", "widget", "telegram"
    conversation_key: str
    audience: str
    author: str | None
    text: str
    # Sent to the model with this turn only; the transcript keeps an "[image]" marker.
    images: tuple[ImageInput, ...] = ()
    # Addressed with /ask: answered even while a person has the conversation (app/handoff).
    ask: bool = False
    # Whose memory the turn reads and writes (app/memory/scope.py); None: not remembered.
    memory_scope: str | None = None
    # In a chat several people share (a Telegram group): who wrote the message, and whose
    # message it replies to. A handoff, and the counts that open one, are then one
    # person's (app/handoff); None: the conversation's (a direct chat, HTTP).
    person: str | None = None
    replying_to: str | None = None


CITATION_EXCERPT_CHARS = 300


@dataclass(frozen=True)
class Citation:
    title: str
    source: str
    heading: str = ""
    excerpt: str = ""  # the start of the passage, for a reader who follows the citation

    @classmethod
    def of(cls, passage: dict[str, Any]) -> "Citation":
        text = passage.get("text", "")
        cut = CITATION_EXCERPT_CHARS
        excerpt = text if len(text) <= cut else text[:cut] + "…"
        return cls(passage["title"], passage["source"], passage.get("heading", ""), excerpt)


def citations_of(answer: str, passages: Iterable[dict[str, Any]]) -> list[Citation]:
    """The passages a turn retrieved (one citation per source), preferring those the
    answer names."""
    found: dict[str, Citation] = {}
    for passage in passages:
        found.setdefault(passage["source"], Citation.of(passage))
    named = [c for c in found.values() if c.source in answer or c.title in answer]
    return named or list(found.values())


@dataclass(frozen=True)
class TurnReply:
    conversation_key: str
    turn: int
    profile: str
    text: str
    citations: list[Citation] = field(default_factory=list)
    usage: UsageTotals = field(default_factory=UsageTotals)
    outcome: str | None = None  # what the turn came to (app/chat/outcome.py)
    # While a person has the conversation after the turn: the handoff's state, `open`
    # (waiting for staff) or `claimed` (a staff member has it); None when the bot has it.
    handoff: str | None = None


IMAGE_MARKER = " [image]"


def with_images(message: BaseMessage, images: Sequence[ImageInput]) -> HumanMessage:
    """The user's message with its images as content parts (LangChain's standard blocks)."""
    parts: list[str | dict[str, Any]] = [{"type": "text", "text": message.text}]
    parts += [
        {"type": "image", "base64": b64encode(i.data).decode(), "mime_type": i.mime_type}
        for i in images
    ]
    return HumanMessage(content=parts, id=message.id)


# What the caller of a failed turn is told (adapters may word it their own way).
FAILED_KEPT = "The assistant could not answer this time; your message was kept. Please try again."
INTERRUPTED_KEPT = (
    "The answer took too long and was stopped; your message was kept. Please try again."
)
NOT_KEPT = "The service could not store your message; it was not kept. Please send it again."


@dataclass(frozen=True)
class TurnStarted:
    """The user's message is stored (committed) as turn `turn`: it survives any failure."""

    conversation_key: str
    turn: int


@dataclass(frozen=True)
class TurnToken:
    """A piece of the answer as the main model writes it."""

    text: str


@dataclass(frozen=True)
class TurnDone:
    """The turn ended `ok`; the reply is stored."""

    reply: TurnReply


@dataclass(frozen=True)
class TurnError:
    """The turn ended without an answer. `message_kept`: the user's message is stored (the
    turn then ended `failed` or `interrupted`); otherwise nothing was stored and `turn` is
    None. `detail` is a reply for the user."""

    conversation_key: str
    turn: int | None
    status: TurnStatus
    message_kept: bool
    detail: str


TurnEvent = TurnStarted | TurnToken | TurnDone | TurnError


class TurnFailed(RuntimeError):
    """A turn ended with a `TurnError` (raised by `ChatService.handle_turn`)."""

    def __init__(self, error: TurnError) -> None:
        super().__init__(f"turn {error.turn} of {error.conversation_key}: {error.status}")
        self.error = error
        self.detail = error.detail
