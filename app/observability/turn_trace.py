"""One turn's trace below its root observation: `TurnTrace`, the LangChain callback
handler that opens an observation per agent step and tool call (with a digest of its
input, never the whole graph state) and one generation per LLM call, which the usage
collector closes with the call's `UsageRecord`; and what those observations show of
messages and graph states, every attribute bounded (`max_attribute_chars`).
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.types import Command

from app.observability.calls import InlineHandler
from app.observability.usage import (
    UsageRecord,
    UsageTotals,
    langfuse_cost_details,
    langfuse_usage_details,
)

if TYPE_CHECKING:
    from app.observability.tracing import Tracer

MAX_TRACE_ATTRIBUTE = 200  # the SDK drops longer session ids, user ids, tags and metadata
_HIDDEN_TAG = "langsmith:hidden"  # LangGraph's internal runs (writers, branches)


def clip(value: str, limit: int = MAX_TRACE_ATTRIBUTE) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


# What observations show of messages and graph states.


def message_view(message: BaseMessage, limit: int) -> dict[str, Any]:
    view: dict[str, Any] = {"role": message.type, "content": clip(message.text, limit)}
    if isinstance(message, AIMessage) and message.tool_calls:
        view["tool_calls"] = [{"name": c["name"], "args": c["args"]} for c in message.tool_calls]
    if isinstance(message, ToolMessage):
        view["tool"] = message.name
    return view


def messages_view(messages: Sequence[BaseMessage], limit: int) -> list[dict[str, Any]]:
    """The request a model was sent, within `limit` characters as the SDK serializes it
    (JSON, non-ASCII escaped): the first message (the system prompt) and as many of the
    latest as fit; a note says how many were left out."""
    views = [message_view(m, limit // 2) for m in messages]
    if len(json.dumps(views)) <= limit or len(views) < 3:
        return views
    head, tail = views[:1], views[1:]
    budget = limit - len(json.dumps(head)) - 60
    kept: list[dict[str, Any]] = []
    for view in reversed(tail):
        size = len(json.dumps(view)) + 2
        if size > budget:
            break
        kept.insert(0, view)
        budget -= size
    left_out = {"role": "note", "content": f"[{len(tail) - len(kept)} messages not shown]"}
    return [*head, left_out, *kept]


def state_digest(value: Any, limit: int) -> Any:
    """A graph state (or a node's update) as a span shows it: how many messages and the
    last one, never the whole history; other values as JSON-like data, clipped."""
    if isinstance(value, Command):
        return state_digest(value.update, limit)
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        messages = [m for m in value["messages"] if isinstance(m, BaseMessage)]
        digest: dict[str, Any] = {"messages": len(value["messages"])}
        if messages:
            digest["last"] = message_view(messages[-1], limit // 2)
        others = sorted(k for k in value if k != "messages")
        if others:
            digest["keys"] = others
        return digest
    if isinstance(value, BaseMessage):
        return message_view(value, limit)
    if isinstance(value, list | tuple):
        return [state_digest(item, limit // max(1, len(value))) for item in value]
    if isinstance(value, dict):
        return {str(k): state_digest(v, limit // max(1, len(value))) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float):
        return value
    return clip(str(value), limit)


@dataclass(frozen=True)
class MemoryReport:
    """What the memory profile decided this turn, for an operator to filter on."""

    results_cleared: int = 0
    tokens_freed: int = 0
    exchanges_trimmed: int = 0
    messages_folded: int = 0
    summary_version: int = 0  # summaries stored so far in the conversation
    # Nothing the previous turn sent was rewritten (nothing cleared, trimmed or folded).
    prefix_kept: bool = True
    # The remembered items (app/memory) the conversation's memory block showed.
    people_memory_items: tuple[int, ...] = ()

    def tags(self) -> list[str]:
        tags = []
        if self.results_cleared:
            tags.append("memory:cleared")
        if self.exchanges_trimmed:
            tags.append("memory:trimmed")
        if self.messages_folded:
            tags.append("memory:folded")
        if self.people_memory_items:
            tags.append("memory:remembered")
        if not self.prefix_kept:
            tags.append("memory:prefix-changed")
        return tags

    def metadata(self) -> dict[str, str]:
        """As `memory_*` trace metadata (the SDK propagates string values only)."""
        return {
            "memory_results_cleared": str(self.results_cleared),
            "memory_tokens_freed": str(self.tokens_freed),
            "memory_exchanges_trimmed": str(self.exchanges_trimmed),
            "memory_messages_folded": str(self.messages_folded),
            "memory_summary_version": str(self.summary_version),
            "memory_prefix_kept": str(self.prefix_kept).lower(),
            "memory_people_items": ",".join(map(str, self.people_memory_items)),
        }


class TurnTrace(InlineHandler):
    """The observations of one turn below its root: agent steps and tool calls (from
    LangChain callbacks) and generations (opened and closed by the usage collector, whose
    `CallSink` it is, so model events are not sent to it)."""

    handles = frozenset({"chain", "agent"})

    def __init__(self, tracer: "Tracer", root: Any, trace_id: str) -> None:
        self._tracer = tracer
        self._root = root
        self.trace_id = trace_id
        self._limit = tracer.settings.max_attribute_chars
        self._open: dict[UUID, Any] = {}
        self._hidden: dict[UUID, UUID | None] = {}  # hidden run -> its parent run

    def _parent(self, parent_run_id: UUID | None) -> Any:
        while parent_run_id is not None and parent_run_id not in self._open:
            parent_run_id = self._hidden.get(parent_run_id)
        return self._open[parent_run_id] if parent_run_id is not None else self._root

    def _start(self, run_id: UUID, parent_run_id: UUID | None, **observation: Any) -> None:
        self._open[run_id] = self._parent(parent_run_id).start_observation(**observation)

    def _end(self, run_id: UUID, **update: Any) -> None:
        self._hidden.pop(run_id, None)
        observation = self._open.pop(run_id, None)
        if observation is not None:
            observation.update(**update).end()

    def _fail(self, run_id: UUID, error: BaseException) -> None:
        self._end(run_id, level="ERROR", status_message=clip(str(error), self._limit))

    # LangChain callbacks: graph steps and tools.

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        if _HIDDEN_TAG in (tags or []):
            self._hidden[run_id] = parent_run_id
            return
        name = kwargs.get("name") or (serialized or {}).get("name") or "chain"
        self._start(
            run_id,
            parent_run_id,
            name=str(name),
            as_type="agent" if parent_run_id is None else "chain",
            input=state_digest(inputs, self._limit),
        )

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, output=state_digest(outputs, self._limit))

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._fail(run_id, error)

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "tool"
        self._start(
            run_id,
            parent_run_id,
            name=str(name),
            as_type="tool",
            input=inputs if inputs is not None else clip(input_str, self._limit),
        )

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, output=state_digest(output, self._limit))

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._fail(run_id, error)

    # The usage collector's calls: generations.

    def call_started(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        *,
        name: str,
        model: str,
        purpose: str,
        messages: list[BaseMessage],
    ) -> None:
        self._start(
            run_id,
            parent_run_id,
            name=name,
            as_type="generation",
            model=model,
            input=messages_view(messages, self._limit),
            metadata={"supportbot_purpose": purpose},
        )

    def call_ended(self, run_id: UUID, record: UsageRecord, reply: AIMessage | None) -> None:
        self._end(
            run_id,
            output=message_view(reply, self._limit) if reply is not None else None,
            model=record.model,
            usage_details=langfuse_usage_details(record),
            cost_details=langfuse_cost_details(record),
            metadata={"supportbot_purpose": record.purpose, "cache_source": record.cache_source},
        )

    def call_failed(self, run_id: UUID, error: BaseException) -> None:
        self._fail(run_id, error)

    # The turn's outcome.

    def finish(
        self,
        answer: str,
        citations: Sequence[dict[str, str]],
        records: Sequence[UsageRecord],
        memory: MemoryReport | None,
        outcome: str | None = None,
    ) -> None:
        """The trace's output, the memory's decisions, the turn's outcome (an
        `outcome:<name>` tag and the `resolved` score) and the turn's scores."""
        self._root.update(output={"text": clip(answer, self._limit), "citations": citations})
        self._scores(records, memory)
        if outcome is not None:
            # Averaged over traces, the share answered from the documentation.
            self._tracer.score(self.trace_id, "resolved", float(outcome == "answered"))
        tags = [f"outcome:{outcome}"] if outcome else []
        if memory is not None:
            tags += memory.tags()
        self._propagate(tags, memory.metadata() if memory else {})

    @staticmethod
    def _propagate(tags: list[str], metadata: dict[str, str]) -> None:
        """Tags and metadata on the root observation (the current one here) and, as trace
        tags and metadata, on anything the turn still opens."""
        from langfuse import propagate_attributes  # a trace exists: Langfuse is loaded

        with propagate_attributes(tags=tags, metadata=metadata):
            pass

    def _scores(self, records: Sequence[UsageRecord], memory: MemoryReport | None) -> None:
        """`cache_hit_rate`: the agent calls' cached share; `context_tokens`: what the last
        agent call was sent; `prefix_kept`: 1 when memory rewrote nothing sent before."""
        agent_calls = [r for r in records if r.purpose == "agent"]
        if agent_calls:
            hit_rate = UsageTotals.of(agent_calls).cached_share
            self._tracer.score(self.trace_id, "cache_hit_rate", hit_rate)
            context = float(agent_calls[-1].input_tokens)
            self._tracer.score(self.trace_id, "context_tokens", context)
        if memory is not None:
            self._tracer.score(self.trace_id, "prefix_kept", float(memory.prefix_kept))

    def failed(self, status: str, error: str) -> None:
        self._root.update(level="ERROR", status_message=clip(f"{status}: {error}", self._limit))
        self._propagate(["outcome:failed"], {})
