"""Stored messages <-> LangChain messages."""

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from app.agent.messages import count_message_tokens, message_text, user_content
from app.db.models import Message


def to_langchain(message: Message) -> BaseMessage:
    message_id = str(message.id)
    if message.role == "user":
        return HumanMessage(content=user_content(message.author, message.content), id=message_id)
    if message.role == "staff":  # a person of the support team, who took the chat over
        content = f"{message.author or 'Support'} (support team): {message.content}"
        return AIMessage(content=content, id=message_id)
    if message.role == "assistant":
        return AIMessage(
            content=message.content, tool_calls=message.tool_calls or [], id=message_id
        )
    cleared = message.context_state == "cleared"
    return ToolMessage(
        content=(message.placeholder if cleared else message.content) or "",
        tool_call_id=message.tool_call_id or "",
        name=message.tool_name,
        artifact=None if cleared else message.artifact,
        # the mark LangChain's ClearToolUsesEdit uses; memory profiles read it
        response_metadata={"context_editing": {"cleared": True}} if cleared else {},
        id=message_id,
    )


def from_langchain(message: BaseMessage) -> dict[str, Any]:
    """The columns of a new stored message (the caller adds conversation, seq and turn);
    every kind names the same columns, so a turn's messages are inserted in one statement."""
    common = {
        "content": message_text(message),
        "token_count": count_message_tokens(message),
        "tool_calls": None,
        "tool_call_id": None,
        "tool_name": None,
        "artifact": None,
    }
    if isinstance(message, AIMessage):
        return {**common, "role": "assistant", "tool_calls": message.tool_calls or None}
    if isinstance(message, ToolMessage):
        return {
            **common,
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "tool_name": message.name,
            "artifact": message.artifact,
        }
    raise ValueError(f"the agent produced an unexpected {type(message).__name__}")
