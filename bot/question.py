"""The whole question as the model gets it: what the user wrote, the message they reply
to when it is someone else's, and (group context `all`) what the chat said meanwhile.

All of it is one turn's text, so it is stored with the turn and the chat's memory profile
treats it like any message; the extras are clipped so that the question itself always fits
the message limit."""

from collections.abc import Sequence
from dataclasses import dataclass

from telegram import Document, Message, PhotoSize
from telegram.constants import FileSizeLimit

from app.chat.types import ImageInput
from bot.updates import author_name, replies_to_bot

# What an image-capable model reads; Telegram re-encodes photos as JPEG.
READABLE_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp"})
CAN_READ = (
    "I can read text, photos and PNG, JPEG or WebP images sent as files "
    f"(up to {FileSizeLimit.FILESIZE_DOWNLOAD // 1_000_000} MB)."
)
CLIPPED = "…"


@dataclass(frozen=True)
class Picture:
    file: PhotoSize | Document
    mime_type: str

    async def download(self) -> ImageInput:
        data = await (await self.file.get_file()).download_as_bytearray()
        return ImageInput(bytes(data), self.mime_type)


def picture_of(message: Message) -> Picture | None:
    """The image a message carries: its largest photo size, or an image sent as a file."""
    if message.photo:
        return Picture(max(message.photo, key=lambda p: p.width * p.height), "image/jpeg")
    document = message.document
    if (
        document is not None
        and document.mime_type in READABLE_IMAGE_TYPES
        and (document.file_size or 0) <= FileSizeLimit.FILESIZE_DOWNLOAD
    ):
        return Picture(document, document.mime_type)
    return None


def has_unreadable_file(message: Message) -> bool:
    return message.document is not None and picture_of(message) is None


@dataclass(frozen=True)
class Quote:
    """The message a question replies to: who wrote it, its text (or the part the user
    quoted), and its picture."""

    author: str
    text: str
    picture: Picture | None

    def line(self, budget: int) -> str:
        seen = ", with an image" if self.picture else ""
        head = f"[In reply to {self.author}{seen}: "
        return head + _clip(f'"{self.text}"', budget - len(head) - 1) + "]"


def quote_of(message: Message) -> Quote | None:
    """The replied-to message when it is someone else's (a reply to the bot is already in
    the conversation) and not a forum topic's first message (which every topic message
    replies to)."""
    replied = message.reply_to_message
    if replied is None or replies_to_bot(message) or replied.forum_topic_created is not None:
        return None
    text = message.quote.text if message.quote else replied.text or replied.caption or ""
    picture = picture_of(replied)
    if not text and picture is None:
        return None
    return Quote(author_name(replied) or "someone", text, picture)


def _clip(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    return text[: max(budget - len(CLIPPED), 0)] + CLIPPED


CONTEXT_HEAD = "[Said in the chat before this message, not addressed to you:"


def context_block(lines: Sequence[str], budget: int) -> str:
    """The chat's latest lines that fit the budget, oldest first; empty when none fit."""
    kept: list[str] = []
    used = len(CONTEXT_HEAD) + 2  # the head's line break and the closing bracket
    for line in reversed(lines):
        if used + len(line) + 1 > budget:
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join([CONTEXT_HEAD, *reversed(kept)]) + "]" if kept else ""


def whole_question(question: str, quote: Quote | None, context: Sequence[str], limit: int) -> str:
    """The turn's text: the context, the quote, then the question; the extras within what
    `limit` leaves."""
    budget = limit - len(question) - 1
    parts: list[str] = []
    if quote is not None and len(line := quote.line(budget)) <= budget:
        parts.append(line)
        budget -= len(line) + 1
    if context and (block := context_block(context, budget)):
        parts.insert(0, block)
    return "\n".join([*parts, question]) if question else "\n".join(parts)
