"""Records every LLM call of a turn (any purpose: agent, summary, expert) as it finishes."""

import time
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

PURPOSE_KEY = "supportbot_purpose"  # run metadata key: "agent" (default), "summary", "expert"


@dataclass
class LLMCallRecord:
    purpose: str
    model: str
    input_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    output_tokens: int
    latency_ms: int
    cache_source: str = "none"
    cost_usd: float = 0.0


class LLMCallCollector(BaseCallbackHandler):
    """A LangChain callback handler that keeps one record per finished chat-model call."""

    def __init__(self) -> None:
        self.calls: list[LLMCallRecord] = []
        self._started: dict[UUID, tuple[float, str, str]] = {}

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
        model = str(metadata.get("ls_model_name") or (serialized or {}).get("name") or "unknown")
        self._started[run_id] = (
            time.perf_counter(),
            str(metadata.get(PURPOSE_KEY, "agent")),
            model,
        )

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        started, purpose, model = self._started.pop(
            run_id, (time.perf_counter(), "agent", "unknown")
        )
        generation = response.generations[0][0] if response.generations else None
        message = generation.message if isinstance(generation, ChatGeneration) else None
        usage = message.usage_metadata if isinstance(message, AIMessage) else None
        usage = usage or {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        details = usage.get("input_token_details") or {}
        if isinstance(message, AIMessage):
            model = str(message.response_metadata.get("model_name") or model)
        self.calls.append(
            LLMCallRecord(
                purpose=purpose,
                model=model,
                input_tokens=usage["input_tokens"],
                cached_tokens=details.get("cache_read", 0),
                cache_write_tokens=details.get("cache_creation", 0),
                output_tokens=usage["output_tokens"],
                latency_ms=round((time.perf_counter() - started) * 1000),
                cache_source="provider" if "cache_read" in details else "none",
            )
        )
