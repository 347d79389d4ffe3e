"""What a profile changes in the context this turn: pure functions over the messages the
model saw last turn, so the same stored state always yields the same decisions.

Units: an *exchange* is a user message and everything the agent did for it, up to the next
user message. Trimming and folding move whole exchanges only, so a tool result never
loses its call and the kept part never starts with a tool result.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolCall,
    ToolMessage,
)

from app.agent.memory.profiles import ClearingPolicy, MemoryProfile, SummaryPolicy, TrimPolicy
from app.agent.messages import count_message_tokens
from knowledge.tokens import count_tokens

QUERY_CHARS = 80  # of a tool call's arguments in a placeholder


@lru_cache(maxsize=8192)
def _count_text(text: str) -> int:
    return count_tokens(text)


def message_tokens(message: BaseMessage) -> int:
    """`count_message_tokens`, cached for the long tool results seen again every turn."""
    if isinstance(message, ToolMessage) and isinstance(message.content, str):
        return _count_text(message.content)
    return count_message_tokens(message)


def conversation_tokens(messages: Sequence[AnyMessage], summary: str | None) -> int:
    return sum(message_tokens(m) for m in messages) + (_count_text(summary) if summary else 0)


def exchanges(messages: Sequence[AnyMessage]) -> list[list[AnyMessage]]:
    groups: list[list[AnyMessage]] = []
    for message in messages:
        if isinstance(message, HumanMessage) or not groups:
            groups.append([])
        groups[-1].append(message)
    return groups


def is_cleared(message: AnyMessage) -> bool:
    # LangChain's ClearToolUsesEdit marks its edits the same way.
    return bool(message.response_metadata.get("context_editing", {}).get("cleared"))


def tool_calls_by_id(messages: Sequence[AnyMessage]) -> dict[str, ToolCall]:
    return {
        call_id: call
        for m in messages
        if isinstance(m, AIMessage)
        for call in m.tool_calls
        if (call_id := call.get("id"))
    }


def describe_tool_result(result: ToolMessage, call: ToolCall | None) -> str:
    """`search_knowledge_base("VAT report") → 4 passages, recall id 17`: what was asked,
    what came back and how to get it again."""
    args = ", ".join(
        _shorten(json.dumps(value, ensure_ascii=False))
        for value in (call["args"] if call else {}).values()
    )
    size = (
        f"{len(result.artifact)} passages"
        if isinstance(result.artifact, list)
        else f"{message_tokens(result)} tokens"
    )
    return f"{result.name or 'tool'}({args}) → {size}, recall id {result.id}"


def placeholder(result: ToolMessage, call: ToolCall | None) -> str:
    return f"[cleared: {describe_tool_result(result, call)}]"


def _shorten(text: str) -> str:
    return text if len(text) <= QUERY_CHARS else text[: QUERY_CHARS - 2] + '…"'


def cleared_copy(message: ToolMessage, text: str) -> ToolMessage:
    metadata = {**message.response_metadata, "context_editing": {"cleared": True}}
    return message.model_copy(
        update={"content": text, "artifact": None, "response_metadata": metadata}
    )


@dataclass
class MemoryPlan:
    """This turn's decisions. Applied, they change the context once; kept (persisted),
    they leave it unchanged until the next decision."""

    placeholders: dict[str, str] = field(default_factory=dict)  # tool results leaving view
    fold: list[AnyMessage] = field(default_factory=list)  # oldest exchanges -> summary
    trim: list[AnyMessage] = field(default_factory=list)  # oldest exchanges -> archive only

    @property
    def dropped_ids(self) -> list[str]:
        return [str(m.id) for m in [*self.fold, *self.trim]]

    @property
    def changes_context(self) -> bool:
        return bool(self.placeholders or self.fold or self.trim)


def plan_memory(
    messages: Sequence[AnyMessage], summary: str | None, profile: MemoryProfile
) -> MemoryPlan:
    """Clear, then fold, then trim: each step works on the context the previous one left."""
    plan = MemoryPlan()
    calls = tool_calls_by_id(messages)
    view = list(messages)
    if profile.clearing:
        plan.placeholders = _plan_clearing(view, summary, profile.clearing, calls)
        view = [
            cleared_copy(m, plan.placeholders[str(m.id)])
            if isinstance(m, ToolMessage) and str(m.id) in plan.placeholders
            else m
            for m in view
        ]
    groups = exchanges(view)
    if profile.summary:
        folded, groups = _split_for_summary(groups, summary, profile.summary)
        plan.fold = [m for group in folded for m in group]
    if profile.trim:
        trimmed, groups = _split_for_trim(groups, summary, profile.trim)
        plan.trim = [m for group in trimmed for m in group]
    for message in [*plan.fold, *plan.trim]:  # archived results keep a findable description
        if isinstance(message, ToolMessage) and not is_cleared(message):
            plan.placeholders[str(message.id)] = placeholder(
                message, calls.get(message.tool_call_id)
            )
    return plan


def _plan_clearing(
    view: list[AnyMessage],
    summary: str | None,
    policy: ClearingPolicy,
    calls: dict[str, ToolCall],
) -> dict[str, str]:
    """All results older than the last `keep`, or none: one big step when it pays."""
    results = [m for m in view if isinstance(m, ToolMessage) and m.name not in policy.exclude_tools]
    old = results[: max(len(results) - policy.keep, 0)]
    placeholders = {
        str(m.id): placeholder(m, calls.get(m.tool_call_id)) for m in old if not is_cleared(m)
    }
    freed = sum(
        message_tokens(m) - _count_text(placeholders[str(m.id)])
        for m in old
        if str(m.id) in placeholders
    )
    over = conversation_tokens(view, summary) > policy.trigger_tokens
    if not placeholders or not over or freed < policy.clear_at_least:
        return {}
    return placeholders


def _tokens(groups: Sequence[Sequence[AnyMessage]], summary: str | None) -> int:
    return conversation_tokens([m for group in groups for m in group], summary)


def _split_for_summary(
    groups: list[list[AnyMessage]], summary: str | None, policy: SummaryPolicy
) -> tuple[list[list[AnyMessage]], list[list[AnyMessage]]]:
    by_tokens = (
        policy.trigger_tokens is not None and _tokens(groups, summary) > policy.trigger_tokens
    )
    by_count = policy.trigger_exchanges is not None and len(groups) >= policy.trigger_exchanges
    cut = len(groups) - policy.keep_exchanges
    if not (by_tokens or by_count) or cut <= 0:
        return [], groups
    return groups[:cut], groups[cut:]


def _split_for_trim(
    groups: list[list[AnyMessage]], summary: str | None, policy: TrimPolicy
) -> tuple[list[list[AnyMessage]], list[list[AnyMessage]]]:
    """Past the high mark, drop the oldest exchanges until under the low mark; the current
    exchange always stays."""
    if _tokens(groups, summary) <= policy.high_tokens:
        return [], groups
    cut = 0
    while cut < len(groups) - 1 and _tokens(groups[cut:], summary) > policy.low_tokens:
        cut += 1
    return groups[:cut], groups[cut:]
