"""How the service writes and reads message text (shared by the agent, memory and chat)."""

import json
import re

from langchain_core.messages import AIMessage, BaseMessage

from knowledge.tokens import count_tokens

_AUTHOR_PREFIX = re.compile(r"^[^:\n]{1,64}: ")


def user_content(author: str | None, text: str) -> str:
    """Several people share a group chat: the model sees who said what."""
    return f"{author}: {text}" if author else text


def strip_author(content: str) -> str:
    return _AUTHOR_PREFIX.sub("", content, count=1)


def message_text(message: BaseMessage) -> str:
    """The text of a message, whatever shape its content has."""
    if isinstance(message.content, str):
        return message.content
    return " ".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in message.content
    )


def count_message_tokens(message: BaseMessage) -> int:
    tokens = count_tokens(message_text(message))
    if isinstance(message, AIMessage) and message.tool_calls:
        tokens += count_tokens(json.dumps(message.tool_calls, ensure_ascii=False))
    return tokens
