"""Chat model selection: the offline model, any init_chat_model provider, or an
OpenAI-compatible endpoint (OpenRouter, Ollama, vLLM, llama.cpp server); and the
middleware that keeps a turn answering when its model fails or runs long."""

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import SimpleNamespace
from typing import Any

from langchain.agents.middleware import (
    AgentMiddleware,
    ModelCallLimitMiddleware,
    ModelFallbackMiddleware,
    ModelRequest,
    ModelResponse,
    ModelRetryMiddleware,
    hook_config,
)
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from app.agent.offline import OfflineChatModel
from app.decisions.decider import MessageDecider
from app.settings import LLMSettings
from app.start_up_errors import InvalidSetting

OFFLINE = "offline"
# The LLM settings that name a model (`build_chat_model`'s `name`)
MODEL_SETTINGS = ("model", "summary_model", "expert_model", "fallback_model")
OUT_OF_STEPS = (
    "I ran out of steps for this question before I could finish my answer. "
    "Please ask again, perhaps one part at a time."
)


def build_chat_model(
    name: str, llm: LLMSettings, *, client_retries: int | None = None
) -> BaseChatModel:
    """`name` is `offline`, a `provider:model` spec, or a model served at `llm.base_url`.
    An endpoint's client retries `client_retries` times (default `llm.max_retries`); the
    main agent's models pass 0, as its ModelRetryMiddleware retries them."""
    if name == OFFLINE:
        return OfflineChatModel()
    api_key = llm.api_key.get_secret_value() if llm.api_key else None
    if llm.base_url:
        # Imported here: the OpenAI SDK's types are slow to import, which a service on the
        # offline model or another provider need not pay at start-up.
        from langchain_openai import ChatOpenAI

        model = ChatOpenAI(
            model=name,
            base_url=llm.base_url,
            api_key=api_key,
            temperature=llm.temperature,
            timeout=llm.timeout_seconds,
            stream_usage=True,
            max_retries=llm.max_retries if client_retries is None else client_retries,
        )
        model.client = PlainJsonCompletions(model.root_client, asynchronous=False)
        model.async_client = PlainJsonCompletions(model.root_async_client, asynchronous=True)
        return model
    extra: dict[str, Any] = {"api_key": api_key} if api_key else {}
    try:
        return init_chat_model(
            name, temperature=llm.temperature, timeout=llm.timeout_seconds, **extra
        )
    except ValueError as unknown:  # no provider inferred from the name, or none installed
        setting = next((field for field in MODEL_SETTINGS if getattr(llm, field) == name), None)
        if setting is None:  # a name given in code (the evals), not a setting
            raise
        reason = str(unknown).splitlines()[0]
        raise InvalidSetting(f"SUPPORTBOT_LLM__{setting.upper()}", reason) from unknown


def warm_up_chat_model(model: BaseChatModel) -> None:
    """Read a reply and a streamed chunk as a call to an OpenAI-compatible endpoint would,
    without calling it (start-up does this before readiness): the SDK's response types
    complete their pydantic schemas when the first reply is parsed, which the first turn
    would pay otherwise. Nothing for another model."""
    if not isinstance(getattr(model, "async_client", None), PlainJsonCompletions):
        return
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    reply = ChatCompletion.model_construct(**_SAMPLE_REPLY)
    model._create_chat_result(reply)  # type: ignore[attr-defined]
    ChatCompletionChunk.model_construct(**_SAMPLE_CHUNK)


_SAMPLE_USAGE: dict[str, Any] = {
    "prompt_tokens": 2,
    "completion_tokens": 1,
    "total_tokens": 3,
    "prompt_tokens_details": {"cached_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0},
}
_SAMPLE_CALL: dict[str, Any] = {
    "id": "call_0",
    "type": "function",
    "function": {"name": "f", "arguments": "{}"},
}
# A chat.completion with a tool call and usage, and a chunk of a streamed one: what parsing
# the first replies builds (`warm_up_chat_model`).
_SAMPLE_REPLY: dict[str, Any] = {
    "id": "warm-up",
    "object": "chat.completion",
    "created": 0,
    "model": "warm-up",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "", "tool_calls": [_SAMPLE_CALL]},
            "finish_reason": "tool_calls",
        }
    ],
    "usage": _SAMPLE_USAGE,
}
_SAMPLE_CHUNK: dict[str, Any] = {
    "id": "warm-up",
    "object": "chat.completion.chunk",
    "created": 0,
    "model": "warm-up",
    "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **_SAMPLE_CALL}]}}],
    "usage": _SAMPLE_USAGE,
}


# Per-request options the plain path does not take: a call with one goes through `create`.
_SDK_ONLY_OPTIONS = frozenset({"extra_query", "extra_body", "timeout"})


class PlainJsonCompletions:
    """`chat.completions` for ChatOpenAI that posts the request body as the plain JSON
    LangChain already made, through the SDK's documented `post` for custom requests
    (auth, retries, timeouts and response parsing as usual). The SDK's own `create` first
    walks the whole body against its typed dicts, every message of the history on every
    call, CPU that grows with the chat.
    `with_raw_response.create` (what LangChain calls when not streaming) is the same
    request asking for the raw response, as the SDK's own resources do."""

    def __init__(self, client: Any, *, asynchronous: bool) -> None:  # openai.(Async)OpenAI
        from openai import AsyncStream, Stream
        from openai._legacy_response import (
            async_to_raw_response_wrapper,
            to_raw_response_wrapper,
        )
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        self._client = client
        self._reply_class = ChatCompletion
        self._stream_class = (AsyncStream if asynchronous else Stream)[ChatCompletionChunk]
        wrapper = async_to_raw_response_wrapper if asynchronous else to_raw_response_wrapper
        self.with_raw_response = SimpleNamespace(create=wrapper(self.create))

    def create(self, **params: Any) -> Any:
        if params.keys() & _SDK_ONLY_OPTIONS:
            return self._client.chat.completions.create(**params)
        headers = params.pop("extra_headers", None)
        return self._client.post(
            "/chat/completions",
            body=params,
            cast_to=self._reply_class,
            stream=bool(params.get("stream")),
            stream_cls=self._stream_class,
            options={"headers": headers} if headers else {},
        )


def retry_after_seconds(error: BaseException) -> float | None:
    """How long a provider asked the client to wait (`Retry-After` in seconds or as a date,
    or OpenAI's `retry-after-ms`), read from the HTTP response an SDK error carries."""
    headers = getattr(getattr(error, "response", None), "headers", None)
    if headers is None:
        return None
    with contextlib.suppress(TypeError, ValueError):  # a header no client could read
        if milliseconds := headers.get("retry-after-ms"):
            return max(0.0, float(milliseconds) / 1000)
        if value := headers.get("retry-after"):
            if value.strip().isdigit():
                return float(value)
            return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    return None


# The model request a provider answered with a Retry-After, and when it may be sent again:
# the retry of that same request (ModelRetryMiddleware sends it again, in the same task)
# waits until then; any other request (the fallback's, the next step's) does not.
_HELD: ContextVar[tuple[ModelRequest[Any], float] | None] = ContextVar("held", default=None)


class RetryAfterMiddleware(AgentMiddleware[Any, Any, Any]):
    """Holds the retry of a failed model call until the provider's Retry-After (at most
    `max_wait`) has passed, which ModelRetryMiddleware's own backoff (LangChain 1.5.2)
    ignores. The hold counts from the failure, so the backoff's wait is part of it (a retry
    waits the longer of the two), and it is spent only before a retry: after the last
    attempt nothing waits."""

    def __init__(self, max_wait: float) -> None:
        super().__init__()
        self.max_wait = max_wait

    def _hold(self, request: ModelRequest[Any]) -> float:
        """How long `request` must still wait: the rest of its Retry-After, when it is the
        retry of a call that got one."""
        held = _HELD.get()
        if held is None or held[0] is not request:
            return 0.0
        _HELD.set(None)
        return max(0.0, held[1] - time.monotonic())

    def _failed(self, request: ModelRequest[Any], error: Exception) -> None:
        if wait := min(retry_after_seconds(error) or 0.0, self.max_wait):
            _HELD.set((request, time.monotonic() + wait))

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage:
        time.sleep(self._hold(request))
        try:
            return handler(request)
        except Exception as error:
            self._failed(request, error)
            raise

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        await asyncio.sleep(self._hold(request))
        try:
            return await handler(request)
        except Exception as error:
            self._failed(request, error)
            raise


class StepLimitMiddleware(ModelCallLimitMiddleware[Any]):
    """`ModelCallLimitMiddleware(exit_behavior="end")` for one turn, whose last message
    tells the user the turn ran out of steps (instead of the limit's internal wording)."""

    def __init__(self, steps: int) -> None:
        super().__init__(run_limit=steps, exit_behavior="end")

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        update = super().before_model(state, runtime)
        if update is not None and update.get("jump_to") == "end":
            return {**update, "messages": [AIMessage(OUT_OF_STEPS)]}
        return update


def with_decider(model: BaseChatModel, decider: MessageDecider | None) -> BaseChatModel:
    """The offline model reading small talk and languages with the service's decider (the
    configured DecisionSettings) instead of the default settings' one; another as it is."""
    if decider is not None and isinstance(model, OfflineChatModel):
        return model.model_copy(update={"decider": decider})
    return model


def model_fault_middleware(
    llm: LLMSettings, decider: MessageDecider | None = None
) -> list[AgentMiddleware[Any, Any, Any]]:
    """Fallback (when configured) around retries around the Retry-After wait, outermost
    first: each model, the fallback too, gets its retries; the fallback sees only a
    failure that outlasted them (on_failure="error", so the failure is not an answer).
    `decider`: the service's, for an offline fallback."""
    retry = ModelRetryMiddleware(
        max_retries=llm.max_retries,
        on_failure="error",
        initial_delay=llm.retry_initial_delay_seconds,
        max_delay=llm.retry_max_delay_seconds,
    )
    wait = RetryAfterMiddleware(llm.retry_max_delay_seconds)
    if not llm.fallback_model:  # unset or empty (compose passes an empty variable)
        return [retry, wait]
    model = build_chat_model(llm.fallback_model, llm, client_retries=0)
    return [ModelFallbackMiddleware(with_decider(model, decider)), retry, wait]
