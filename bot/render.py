"""A TurnReply as Telegram messages: the model's Markdown becomes message entities
(telegramify-markdown), split under Telegram's limit without breaking an entity."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import telegramify_markdown
from telegram import MessageEntity
from telegram.constants import MessageLimit
from telegramify_markdown import split_entities, utf16_len

from app.chat.types import Citation

Entity = telegramify_markdown.MessageEntity


@dataclass(frozen=True)
class Part:
    """One Telegram message: plain text and its entities (offsets in UTF-16 code units)."""

    text: str
    entities: tuple[MessageEntity, ...] = ()


Link = Callable[[str], str | None]  # a citation's source → its public page, if it has one


def web_address(source: str) -> str | None:
    return source if source.startswith(("http://", "https://")) else None


def _sources(citations: Sequence[Citation], link: Link) -> tuple[str, list[Entity]]:
    """The sources list: a link when the source has a public page (a web address, or a
    knowledge-base document under SUPPORTBOT_KNOWLEDGE__PUBLIC_BASE_URLS); the title only
    otherwise."""
    text = "Sources:"
    entities = [Entity("bold", 0, utf16_len(text))]
    for citation in citations:
        text += "\n• "
        if url := link(citation.source):
            start, length = utf16_len(text), utf16_len(citation.title)
            entities.append(Entity("text_link", start, length, url=url))
        text += citation.title
    return text, entities


def _telegram_entity(entity: Entity) -> MessageEntity:
    return MessageEntity(
        entity.type, entity.offset, entity.length, url=entity.url, language=entity.language
    )


def _trimmed(text: str, entities: list[Entity]) -> Part:
    """A chunk without the blank lines it was cut at, its entities moved and clipped."""
    shift = utf16_len(text) - utf16_len(text.lstrip())
    text = text.strip()
    end = utf16_len(text)
    kept = []
    for entity in entities:
        start, stop = max(entity.offset - shift, 0), min(entity.offset + entity.length - shift, end)
        if stop > start:
            kept.append(_telegram_entity(entity.copy_with(offset=start, length=stop - start)))
    return Part(text, tuple(kept))


def reply_parts(
    answer: str,
    citations: Sequence[Citation],
    limit: int = MessageLimit.MAX_TEXT_LENGTH,
    link: Link = web_address,
) -> list[Part]:
    """The answer as Telegram messages in order, the sources listed at the end."""
    text, entities = telegramify_markdown.convert(answer.strip())
    text = text.strip()
    if citations:
        sources, source_entities = _sources(citations, link)
        shift = utf16_len(text + "\n\n") if text else 0
        text = f"{text}\n\n{sources}" if text else sources
        entities += [e.copy_with(offset=e.offset + shift) for e in source_entities]
    return split_parts(text, entities, limit)


def split_parts(
    text: str, entities: list[Entity], limit: int = MessageLimit.MAX_TEXT_LENGTH
) -> list[Part]:
    """Text with its entities as Telegram messages of at most `limit` UTF-16 units, cut
    at paragraph and line breaks where it can (`split_entities`)."""
    return [_trimmed(*chunk) for chunk in split_entities(text, entities, limit)]
