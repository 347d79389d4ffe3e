"""The peers: LangChain v1's own memory middleware, run through the same `ChatService`.

`SummarizationMiddleware` decides exactly as it does in any LangChain agent: before every
model call it counts the messages (its summary message first) and, past its trigger,
folds all but its `keep` into a new summary written by the summary model from its own
prompt. LangChain keeps that in the graph's checkpoint; ChatService keeps the context in
the database instead, so `StoredSummarization` stores the fold the way it stores the
app's own (the folded messages `dropped`, the summary a `Summary` row) and puts the
summary back where LangChain has it, as the first message. `ContextEditingMiddleware`
needs nothing stored: it re-computes its clearing on a copy of every request.

One difference remains: a message of the current turn is not stored yet when a fold
takes it (a `keep` smaller than one turn), so it stays in the context.
"""

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import (
    AgentMiddleware,
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    ModelRequest,
    ModelResponse,
    SummarizationMiddleware,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage, RemoveMessage
from langgraph.runtime import Runtime

from app.agent.memory.middleware import model_name
from app.agent.memory.state import MemoryContext, MemoryState, MemoryUpdate
from app.agent.memory.summarizer import LANGCHAIN_SUMMARY_START
from app.observability.calls import PURPOSE_KEY
from app.runtime import MemoryFactory
from evals.profiles import LangChainPeer, peer_profiles

SUMMARY_MESSAGE_ID = "langchain-summary"


def summary_message(summary: str) -> HumanMessage:
    """The summary as LangChain's middleware sends it."""
    return HumanMessage(
        content=f"{LANGCHAIN_SUMMARY_START}\n\n{summary}",
        additional_kwargs={"lc_source": "summarization"},
        id=SUMMARY_MESSAGE_ID,
    )


def _is_stored(message: AnyMessage) -> bool:
    return str(message.id).isdigit()  # database ids; this turn's messages have none yet


class StoredSummarization(AgentMiddleware[MemoryState, MemoryContext, Any]):
    state_schema = MemoryState

    def __init__(
        self, summarization: SummarizationMiddleware[Any, MemoryContext], summary_model: str
    ) -> None:
        super().__init__()
        self.summarization = summarization
        self.summary_model = summary_model

    def _langchain_state(self, state: MemoryState) -> dict[str, Any]:
        summary = state.get("summary")
        messages = state["messages"]
        return {"messages": [summary_message(summary), *messages] if summary else [*messages]}

    def _stored(self, state: MemoryState, update: dict[str, Any] | None) -> dict[str, Any] | None:
        """LangChain's update (remove all, then the summary and the kept messages) as
        removals by id and a `MemoryUpdate` ChatService persists."""
        if update is None:
            return None
        summary, *kept = update["messages"][1:]
        kept_ids = {m.id for m in kept}
        removed = [m for m in state["messages"] if m.id not in kept_ids and _is_stored(m)]
        if not removed:
            return None
        text = summary.text[len(LANGCHAIN_SUMMARY_START) :].strip()
        earlier = state.get("memory") or MemoryUpdate()
        memory = MemoryUpdate(
            dropped=[*earlier.dropped, *(str(m.id) for m in removed)],
            summary=text,
            summary_model=self.summary_model,
        )
        return {
            "messages": [RemoveMessage(id=str(m.id)) for m in removed],
            "summary": text,
            "memory": memory,
        }

    def before_model(
        self, state: MemoryState, runtime: Runtime[MemoryContext]
    ) -> dict[str, Any] | None:
        langchain_state: Any = self._langchain_state(state)
        return self._stored(state, self.summarization.before_model(langchain_state, runtime))

    async def abefore_model(
        self, state: MemoryState, runtime: Runtime[MemoryContext]
    ) -> dict[str, Any] | None:
        langchain_state: Any = self._langchain_state(state)
        update = await self.summarization.abefore_model(langchain_state, runtime)
        return self._stored(state, update)

    @staticmethod
    def _with_summary(request: ModelRequest[MemoryContext]) -> ModelRequest[MemoryContext]:
        summary = request.state.get("summary")
        if not isinstance(summary, str) or not summary:
            return request
        return request.override(messages=[summary_message(summary), *request.messages])

    def wrap_model_call(
        self,
        request: ModelRequest[MemoryContext],
        handler: Callable[[ModelRequest[MemoryContext]], ModelResponse[Any]],
    ) -> Any:
        return handler(self._with_summary(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[MemoryContext],
        handler: Callable[[ModelRequest[MemoryContext]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        return await handler(self._with_summary(request))


def peer_memory(peer: LangChainPeer) -> MemoryFactory:
    def build(summary_model: BaseChatModel) -> list[AgentMiddleware[Any, Any, Any]]:
        # LangChain tags its summary calls `lc_source`; ours are recorded by purpose.
        tagged = summary_model.model_copy(
            update={"metadata": {**(summary_model.metadata or {}), PURPOSE_KEY: "summary"}}
        )
        middleware: list[AgentMiddleware[Any, Any, Any]] = [
            StoredSummarization(
                SummarizationMiddleware[Any, MemoryContext](tagged, **peer.summarization),
                model_name(summary_model),
            )
        ]
        if peer.clear_tool_uses is not None:
            edit = ClearToolUsesEdit(**peer.clear_tool_uses)
            middleware.append(ContextEditingMiddleware(edits=[edit]))
        return middleware

    return build


def peer_memory_factories() -> dict[str, MemoryFactory]:
    return {name: peer_memory(peer) for name, peer in peer_profiles().items()}
