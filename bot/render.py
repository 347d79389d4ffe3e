"""A TurnReply as Telegram HTML messages: escaped, split under Telegram's length limit."""

from html import escape

from telegram.constants import MessageLimit

from app.chat.types import Citation

# Coarser boundaries first: a message ends at a paragraph when it can, mid-word never
# unless a single word is longer than a message.
_SEPARATORS = ("\n\n", "\n", ". ", " ")


def _html_length(text: str) -> int:
    # Telegram counts characters after parsing, so the escaped length is a safe upper bound.
    return len(escape(text, quote=False))


def _hard_cut(text: str, limit: int) -> list[str]:
    pieces, current, length = [], "", 0
    for char in text:
        size = _html_length(char)
        if length + size > limit:
            pieces.append(current)
            current, length = "", 0
        current, length = current + char, length + size
    return [*pieces, current] if current else pieces


def split_text(text: str, limit: int = MessageLimit.MAX_TEXT_LENGTH) -> list[str]:
    """Plain-text pieces whose escaped HTML fits in one message each."""
    return _split(text.strip(), limit, _SEPARATORS)


def _split(text: str, limit: int, separators: tuple[str, ...]) -> list[str]:
    if _html_length(text) <= limit:
        return [text] if text else []
    if not separators:
        return _hard_cut(text, limit)
    separator, finer = separators[0], separators[1:]
    pieces: list[str] = []
    current = ""
    for part in text.split(separator):
        joined = f"{current}{separator}{part}" if current else part
        if _html_length(joined) <= limit:
            current = joined
            continue
        if current:
            pieces.append(current)
        if _html_length(part) <= limit:
            current = part
        else:  # the last piece of a long part may still take the next part
            *full, current = _split(part, limit, finer)
            pieces += full
    if current:
        pieces.append(current)
    return [piece.strip() for piece in pieces if piece.strip()]


def citation_html(citation: Citation) -> str:
    """A link when the source is a web address; documents inside the knowledge base are
    named by their title only."""
    title = escape(citation.title, quote=False)
    if citation.source.startswith(("http://", "https://")):
        return f'<a href="{escape(citation.source)}">{title}</a>'
    return title


def reply_messages(
    answer: str, citations: list[Citation], limit: int = MessageLimit.MAX_TEXT_LENGTH
) -> list[str]:
    """The answer as HTML messages in order, the sources listed at the end."""
    messages = [escape(piece, quote=False) for piece in split_text(answer, limit)]
    if citations:
        sources = "Sources:\n" + "\n".join(f"• {citation_html(c)}" for c in citations)
        if messages and len(messages[-1]) + 2 + len(sources) <= limit:
            messages[-1] += "\n\n" + sources
        else:
            messages.append(sources)
    return messages
