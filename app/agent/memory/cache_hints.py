"""Provider prompt-cache hints, added to each model request after memory has shaped it.

Anthropic caches only up to explicit breakpoints: one after the system prompt, one after
the summary (both system blocks) and one on the last message. OpenAI and OpenAI-compatible
routers route by `prompt_cache_key`: one key per conversation keeps its requests on the
same cache. Other providers cache implicitly and get the request unchanged.

The offline model gets the hints of the provider whose cache rules the prefix-cache
simulator applies to its calls: it ignores them, the simulator reads the breakpoints.
"""

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AnyMessage, BaseMessage

from app.agent.memory.state import MemoryContext, MemoryState
from app.agent.offline import OfflineChatModel

EPHEMERAL = {"type": "ephemeral"}


def _marked_blocks(message: BaseMessage, every_block: bool) -> list[str | dict[str, Any]]:
    blocks: list[str | dict[str, Any]] = (
        [{"type": "text", "text": message.content}]
        if isinstance(message.content, str)
        else [b if isinstance(b, dict) else {"type": "text", "text": b} for b in message.content]
    )
    marked = range(len(blocks)) if every_block else range(len(blocks) - 1, len(blocks))
    return [
        {**block, "cache_control": EPHEMERAL}
        if index in marked and isinstance(block, dict) and block.get("text")
        else block
        for index, block in enumerate(blocks)
    ]


def without_cache_hints(content: str | list[str | dict[str, Any]]) -> str | list[Any]:
    """Content as the provider caches it: without breakpoint marks, and a lone text block
    as its text (what the hints turn a string into), so hinted and plain requests compare
    equal where the provider sees the same prefix."""
    if isinstance(content, str):
        return content
    blocks = [
        {key: value for key, value in block.items() if key != "cache_control"}
        if isinstance(block, dict)
        else block
        for block in content
    ]
    match blocks:
        case [{"type": "text", "text": str(text), **rest}] if not rest:
            return text
    return blocks


def with_cache_hints(
    request: ModelRequest[MemoryContext], simulated_provider: str | None = None
) -> ModelRequest[MemoryContext]:
    """`simulated_provider`: the simulator's rules (`anthropic`, `openai`, ...), which
    the offline model's calls are hinted for."""
    provider = request.model._llm_type
    if simulated_provider and isinstance(request.model, OfflineChatModel):
        provider = simulated_provider
    if provider.startswith("anthropic") and request.messages:
        system = request.system_message
        last: AnyMessage = request.messages[-1]
        return request.override(
            system_message=system.model_copy(update={"content": _marked_blocks(system, True)})
            if system
            else None,
            messages=[
                *request.messages[:-1],
                last.model_copy(update={"content": _marked_blocks(last, False)}),
            ],
        )
    context = request.runtime.context if request.runtime else None
    if provider.startswith("openai") and context is not None:
        key = f"supportbot-conversation-{context.conversation_id}"
        return request.override(model_settings={**request.model_settings, "prompt_cache_key": key})
    return request


class ProviderCacheMiddleware(AgentMiddleware[MemoryState, MemoryContext, Any]):
    state_schema = MemoryState

    def __init__(self, simulated_provider: str | None = None) -> None:
        """`simulated_provider`: see `with_cache_hints`."""
        super().__init__()
        self.simulated_provider = simulated_provider

    def wrap_model_call(
        self,
        request: ModelRequest[MemoryContext],
        handler: Callable[[ModelRequest[MemoryContext]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | Any:
        return handler(with_cache_hints(request, self.simulated_provider))

    async def awrap_model_call(
        self,
        request: ModelRequest[MemoryContext],
        handler: Callable[[ModelRequest[MemoryContext]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | Any:
        return await handler(with_cache_hints(request, self.simulated_provider))
