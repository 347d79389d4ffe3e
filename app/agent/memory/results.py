"""How much of a knowledge-base search the model is shown: fresh tokens are the expensive
ones (a cached token costs ~0.1×), and a search result is the largest fresh part of a turn.

`ResultBudgetMiddleware` re-renders each `search_knowledge_base` result (the artifact, all
passages, stays for citations and recall) under the profile's `ResultPolicy`: the turn's
first search gets `first_tokens`, each further search of the same turn `later_tokens`
(reformulations mostly find the same pages again), and a passage the model still sees
verbatim in an earlier result of its context is named, not sent again.
"""

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AnyMessage, HumanMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from app.agent.memory.decisions import is_cleared
from app.agent.memory.profiles import ResultPolicy
from app.agent.tools import KNOWLEDGE_TOOL, SUGGESTED
from knowledge.format import format_passages, one_line
from knowledge.types import Passage

ToolResult = ToolMessage | Command[Any]


def searches_this_turn(messages: list[AnyMessage]) -> int:
    """Knowledge-base results since the last user message."""
    count = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        count += isinstance(message, ToolMessage) and message.name == KNOWLEDGE_TOOL
    return count


def shown_verbatim(messages: list[AnyMessage]) -> str:
    """The text of the search results the model still sees in full."""
    return "\n".join(
        str(m.content)
        for m in messages
        if isinstance(m, ToolMessage) and m.name == KNOWLEDGE_TOOL and not is_cleared(m)
    )


def shaped_result(
    result: ToolMessage, query: str, messages: list[AnyMessage], policy: ResultPolicy
) -> ToolMessage:
    if not isinstance(result.artifact, list) or not result.artifact:
        return result
    if any(p.get(SUGGESTED) for p in result.artifact):
        return result  # pages offered as related: the search tool worded them itself
    passages = [Passage(**p) for p in result.artifact]
    visible = shown_verbatim(messages)
    seen = [p for p in passages if p.text in visible] if policy.reference_seen else []
    fresh = [p for p in passages if p not in seen]
    budget = policy.later_tokens if searches_this_turn(messages) else policy.first_tokens
    text = format_passages(query, fresh, budget) if fresh else f'Results for "{query}":'
    if seen:
        text += "\nShown in full in an earlier result above: " + "; ".join(
            f"{one_line(p.title)} — {one_line(p.heading or p.title)} (source: {one_line(p.source)})"
            for p in seen
        )
    return result.model_copy(update={"content": text})


class ResultBudgetMiddleware(AgentMiddleware[Any, Any, Any]):
    def __init__(self, policy: ResultPolicy) -> None:
        super().__init__()
        self.policy = policy

    def _shaped(self, request: ToolCallRequest, result: ToolResult) -> ToolResult:
        if not isinstance(result, ToolMessage) or result.name != KNOWLEDGE_TOOL:
            return result
        query = str(request.tool_call["args"].get("query", ""))
        return shaped_result(result, query, request.state["messages"], self.policy)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]
    ) -> ToolResult:
        return self._shaped(request, handler(request))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        return self._shaped(request, await handler(request))
