"""The memory middleware: applies a profile once per turn, before the agent starts.

`before_agent` plans this turn's decisions from the stored context (`plan_memory`), folds
the summary if due, and returns them as state updates: the graph's messages change in
place (by id) and `memory` carries the decisions for ChatService to persist. Because
decisions are persisted and made only when a policy's threshold is passed, the next turn
sends the same prefix again. `wrap_model_call` places the summary right after the system
prompt and offers `recall_history` once something has been archived. When the summary
model fails, this turn keeps every message and the fold is planned again next turn.
"""

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, RemoveMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime

from app.agent.memory.decisions import MemoryPlan, cleared_copy, plan_memory
from app.agent.memory.profiles import MemoryProfile
from app.agent.memory.recall import RECALL_TOOL
from app.agent.memory.state import MemoryContext, MemoryState, MemoryUpdate
from app.agent.memory.summarizer import SUMMARY_RUN_CONFIG, summary_request

ModelCallResult = ModelResponse[Any] | Any
log = logging.getLogger(__name__)


def model_name(model: BaseChatModel) -> str:
    return str(getattr(model, "model_name", None) or getattr(model, "model", None) or "unknown")


def _tool_name(tool: BaseTool | dict[str, Any]) -> str:
    if isinstance(tool, BaseTool):
        return tool.name
    return str(tool.get("name") or tool.get("function", {}).get("name"))


def with_summary(system: SystemMessage | None, *texts: str) -> SystemMessage:
    """The static prompt first, then the remembered people's block (fixed for the whole
    conversation) and the summary (fixed between folds): separate blocks, so the prompt's
    cached prefix survives a new summary (and Anthropic can mark a breakpoint after each)."""
    blocks: list[str | dict[str, Any]] = [{"type": "text", "text": system.text}] if system else []
    return SystemMessage(content=[*blocks, *({"type": "text", "text": t} for t in texts)])


class MemoryMiddleware(AgentMiddleware[MemoryState, MemoryContext, Any]):
    state_schema = MemoryState

    def __init__(
        self, profile: MemoryProfile, summary_model: BaseChatModel, recall_tool: BaseTool
    ) -> None:
        super().__init__()
        self.profile = profile
        self.summary_model = summary_model
        self.tools = [recall_tool]

    def before_agent(
        self, state: MemoryState, runtime: Runtime[MemoryContext]
    ) -> dict[str, Any] | None:
        plan, request = self._plan(state)
        if request is None:
            return self._updates(state, plan, None)
        try:
            summary = self.summary_model.invoke(request, SUMMARY_RUN_CONFIG).text
        except Exception as error:
            return self._updates(state, self._plan_without_fold(state, error), None)
        return self._updates(state, plan, summary)

    async def abefore_agent(
        self, state: MemoryState, runtime: Runtime[MemoryContext]
    ) -> dict[str, Any] | None:
        plan, request = self._plan(state)
        if request is None:
            return self._updates(state, plan, None)
        try:
            summary = (await self.summary_model.ainvoke(request, SUMMARY_RUN_CONFIG)).text
        except Exception as error:
            return self._updates(state, self._plan_without_fold(state, error), None)
        return self._updates(state, plan, summary)

    def _plan(self, state: MemoryState) -> tuple[MemoryPlan, list[BaseMessage] | None]:
        """This turn's memory decisions and, when they fold turns away, the summary request."""
        plan = plan_memory(state["messages"], state.get("summary"), self.profile)
        request = summary_request(state.get("summary"), plan.fold) if plan.fold else None
        return plan, request

    def _plan_without_fold(self, state: MemoryState, error: Exception) -> MemoryPlan:
        """The summary model failed: keep every message this turn. The fold is still due
        next turn, when the same stored context plans it again."""
        log.warning("summary fold postponed: the summary model failed (%s)", type(error).__name__)
        unfolded = self.profile.model_copy(update={"summary": None})
        return plan_memory(state["messages"], state.get("summary"), unfolded)

    def _updates(
        self, state: MemoryState, plan: MemoryPlan, summary: str | None
    ) -> dict[str, Any] | None:
        if not plan.changes_context:
            return None
        dropped = plan.dropped_ids
        changed: list[BaseMessage] = [RemoveMessage(id=message_id) for message_id in dropped]
        changed += [
            cleared_copy(m, plan.placeholders[str(m.id)])
            for m in state["messages"]
            if isinstance(m, ToolMessage)
            and str(m.id) in plan.placeholders
            and str(m.id) not in dropped
        ]
        update = MemoryUpdate(
            placeholders=plan.placeholders,
            dropped=dropped,
            summary=summary,
            summary_model=model_name(self.summary_model) if summary is not None else None,
        )
        return {
            "messages": changed,
            "summary": summary if summary is not None else state.get("summary"),
            "archived": True,
            "memory": update,
        }

    @staticmethod
    def _request_with_memory(request: ModelRequest[MemoryContext]) -> ModelRequest[MemoryContext]:
        added = [request.state.get("people_memory"), request.state.get("summary")]
        texts = [text for text in added if isinstance(text, str) and text]
        if texts:
            request = request.override(system_message=with_summary(request.system_message, *texts))
        if not request.state.get("archived"):  # nothing to recall yet: don't offer the tool
            request = request.override(
                tools=[t for t in request.tools if _tool_name(t) != RECALL_TOOL]
            )
        return request

    def wrap_model_call(
        self,
        request: ModelRequest[MemoryContext],
        handler: Callable[[ModelRequest[MemoryContext]], ModelResponse[Any]],
    ) -> ModelCallResult:
        return handler(self._request_with_memory(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[MemoryContext],
        handler: Callable[[ModelRequest[MemoryContext]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult:
        return await handler(self._request_with_memory(request))
