"""How stable the requests of a conversation are: the measure memory profiles optimise.

A provider bills a prefix it has seen recently at ~0.1×. Between two turns the context
normally only grows, so the previous turn's last request is a prefix of the next turn's
first request; a memory decision that rewrites an earlier part breaks that."""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from app.agent.memory.cache_hints import without_cache_hints
from app.agent.memory.decisions import message_tokens
from app.observability.calls import PURPOSE_KEY

MessageKey = tuple[str, str, str]


def message_key(message: BaseMessage) -> MessageKey:
    """What a provider receives of a message (ids and metadata are not sent) and caches
    (cache-hint marks are not part of the prefix)."""
    content = json.dumps(without_cache_hints(message.content), ensure_ascii=False, sort_keys=True)
    extra = ""
    if isinstance(message, AIMessage) and message.tool_calls:
        extra = json.dumps(message.tool_calls, ensure_ascii=False, sort_keys=True)
    elif isinstance(message, ToolMessage):
        extra = message.tool_call_id
    return (message.type, content, extra)


def extends(previous: Sequence[BaseMessage], following: Sequence[BaseMessage]) -> bool:
    """`following` starts with all of `previous`."""
    return [message_key(m) for m in following[: len(previous)]] == [
        message_key(m) for m in previous
    ]


@dataclass
class TurnRequests:
    turn: int
    requests: list[list[BaseMessage]] = field(default_factory=list)

    @property
    def context_tokens(self) -> int:
        """What the model was sent at the start of the turn (system prompt included)."""
        return sum(message_tokens(m) for m in self.requests[0])


def prefix_changes(turns: Sequence[TurnRequests]) -> list[int]:
    """The turns whose first request does not extend the previous turn's last request."""
    return [
        current.turn
        for previous, current in pairwise(turns)
        if not extends(previous.requests[-1], current.requests[0])
    ]


def call_prefix_breaks(turns: Sequence[TurnRequests]) -> int:
    """The requests, within a turn or at its start, that do not extend the request before
    them: where the provider's cache breaks, whatever decided it."""
    requests = [request for turn in turns for request in turn.requests]
    return sum(1 for previous, current in pairwise(requests) if not extends(previous, current))


class RequestRecorder(BaseCallbackHandler):
    """Keeps every agent (not summary) model request, grouped by the turn in run metadata."""

    def __init__(self) -> None:
        self.turns: list[TurnRequests] = []

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        metadata = metadata or {}
        if metadata.get(PURPOSE_KEY, "agent") != "agent":
            return
        turn = int(metadata.get("turn", 0))
        if not self.turns or self.turns[-1].turn != turn:
            self.turns.append(TurnRequests(turn))
        self.turns[-1].requests.append([m.model_copy(deep=True) for m in messages[0]])
