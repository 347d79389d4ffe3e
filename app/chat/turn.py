"""Running one turn: hold the conversation, store the user's message, run the agent under
the turn's deadline, store the outcome, and tell the caller through `emit`. Every failure
after the message is stored ends the turn `failed` or `interrupted`, never `running`."""

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig

from app.agent.memory.recall import ConversationArchive
from app.agent.memory.state import MemoryContext
from app.chat.store import BegunTurn, HeldConversation, TurnStore
from app.chat.types import (
    FAILED_KEPT,
    INTERRUPTED_KEPT,
    NOT_KEPT,
    InvalidTurn,
    TurnDone,
    TurnError,
    TurnEvent,
    TurnReply,
    TurnRequest,
    TurnStarted,
    TurnStatus,
    TurnToken,
    TurnUsage,
    citations_of,
)
from app.observability import metrics
from app.observability.calls import LLMCallCollector
from app.observability.redact import configured_secrets, redact_secrets
from app.observability.simulator import PrefixCacheSimulator
from app.observability.tracing import Tracer
from app.observability.usage import TokenUsage
from app.settings import Settings

log = logging.getLogger(__name__)

AgentForProfile = Callable[[str], Runnable[Any, Any]]
OnToken = Callable[[str], None]
Emit = Callable[[TurnEvent | InvalidTurn], None]


async def run_agent(
    agent: Runnable[Any, Any],
    working: dict[str, Any],
    config: RunnableConfig,
    context: MemoryContext,
    on_token: OnToken | None,
) -> dict[str, Any]:
    """The agent's final state; with `on_token`, streamed, passing on the text the main
    model writes (not the summarizer's, nor tool-call arguments)."""
    if on_token is None:
        result: dict[str, Any] = await agent.ainvoke(working, config=config, context=context)
        return result
    final: dict[str, Any] = {}
    async for mode, chunk in agent.astream(
        working, config=config, context=context, stream_mode=["messages", "values"]
    ):
        if mode == "values":
            final = chunk
            continue
        message, metadata = chunk
        from_main_model = metadata.get("langgraph_node") == "model"
        if from_main_model and isinstance(message, AIMessageChunk) and message.text:
            on_token(message.text)
    return final


def reply_of(begun: BegunTurn, new_messages: list[BaseMessage], usage: TurnUsage) -> TurnReply:
    answer = new_messages[-1].text if new_messages else ""
    passages = (
        passage
        for m in new_messages
        if isinstance(m, ToolMessage) and isinstance(m.artifact, list)
        for passage in m.artifact
    )
    conversation = begun.conversation
    return TurnReply(
        conversation_key=conversation.key,
        turn=begun.turn.number,
        profile=conversation.profile,
        text=answer,
        citations=citations_of(answer, passages),
        usage=usage,
    )


@dataclass
class TurnRunner:
    """`simulator` stands in for the provider's prompt cache where calls report none;
    `clock` is its time (evals replay the gaps between turns through it)."""

    settings: Settings
    store: TurnStore
    agent_for_profile: AgentForProfile
    tracer: Tracer
    simulator: PrefixCacheSimulator | None
    clock: Callable[[], float]
    _secrets: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self._secrets = configured_secrets(self.settings)

    def _describe(self, error: BaseException) -> str:
        """A failure as `turns.error` stores it and the log shows it: providers echo
        keys and tokens in their errors, so those are scrubbed."""
        return redact_secrets(f"{type(error).__name__}: {error}", self._secrets)

    def count(self, status: TurnStatus, channel: str) -> None:
        if self.settings.observability.metrics_enabled:
            metrics.count_turn(status=status, channel=channel)

    async def run(self, request: TurnRequest, emit: Emit, tokens: bool) -> None:
        """The turn's task. It is ours alone: a cancel (shutdown) is handled here, the
        turn ending `interrupted`, rather than passed on."""
        key = request.conversation_key
        begun: BegunTurn | None = None
        outcome: TurnDone | TurnError | None = None
        try:
            async with self.store.hold(key) as held:
                profile = self.settings.profiles.by_audience[request.audience]
                begun = await self.store.begin(held, request, profile)
                emit(TurnStarted(key, begun.turn.number))
                for _ in range(begun.orphans_closed):
                    self.count("interrupted", request.channel)
                outcome = await self._answer(held, begun, request, emit if tokens else None)
        except InvalidTurn as refused:
            emit(refused)
            return
        except (Exception, asyncio.CancelledError) as error:
            if begun is None:
                log.error("turn of %s not stored: %s", key, self._describe(error))
                outcome = TurnError(key, None, "failed", False, NOT_KEPT)
            else:  # the outcome is stored; giving the connection back failed
                log.error("turn of %s: after its end: %s", key, self._describe(error))
        assert outcome is not None
        emit(outcome)  # after the connection is back: the next turn can start at once

    async def _answer(
        self,
        held: HeldConversation,
        begun: BegunTurn,
        request: TurnRequest,
        emit_token: Emit | None,
    ) -> TurnDone | TurnError:
        """Run the agent and store its outcome; any failure ends the turn `failed`, the
        deadline or a shutdown `interrupted`."""
        started = time.perf_counter()
        conversation, turn = begun.conversation, begun.turn
        collector = LLMCallCollector(
            conversation.profile, self.settings.observability, self.simulator, self.clock
        )
        deadline = asyncio.timeout(self.settings.chat.turn_timeout_seconds)
        on_token = (lambda text: emit_token(TurnToken(text))) if emit_token else None
        try:
            async with deadline:
                result = await self._run_agent(held, begun, request, collector, on_token)
            # Memory may have removed or replaced loaded messages: new ones have new ids.
            loaded = {m.id for m in begun.working["messages"]}
            new_messages = [m for m in result["messages"] if m.id not in loaded]
            await self.store.finish(
                held, begun, new_messages, result.get("memory"), collector.calls
            )
        except (Exception, asyncio.CancelledError) as error:
            interrupted = deadline.expired() or isinstance(error, asyncio.CancelledError)
            status: TurnStatus = "interrupted" if interrupted else "failed"
            stored_error = self._describe(error)
            log.error("turn %s of %s %s: %s", turn.number, conversation.key, status, stored_error)
            log.debug("turn %s of %s failed here", turn.number, conversation.key, exc_info=error)
            try:
                await self.store.fail(held, begun, collector.calls, status, stored_error)
            except Exception as unstored:  # the next turn or a restart closes it
                log.error(
                    "turn %s of %s left running: %s",
                    turn.number,
                    conversation.key,
                    self._describe(unstored),
                )
            self.count(status, request.channel)
            detail = INTERRUPTED_KEPT if interrupted else FAILED_KEPT
            return TurnError(conversation.key, turn.number, status, True, detail)
        self.count("ok", request.channel)
        if self.settings.observability.metrics_enabled:
            metrics.observe_turn(
                profile=conversation.profile,
                channel=request.channel,
                seconds=time.perf_counter() - started,
            )
        return TurnDone(reply_of(begun, new_messages, TurnUsage.of(collector.calls)))

    async def _run_agent(
        self,
        held: HeldConversation,
        begun: BegunTurn,
        request: TurnRequest,
        collector: LLMCallCollector,
        on_token: OnToken | None,
    ) -> dict[str, Any]:
        conversation, turn = begun.conversation, begun.turn
        with self.tracer.turn(
            conversation.key,
            request.author or "anonymous",
            conversation.audience,
            conversation.profile,
            request.channel,
            self.settings.llm.model,
        ) as trace:
            turn.trace_id = trace.trace_id
            config: RunnableConfig = {
                "callbacks": [collector, *trace.callbacks],
                # A backstop only: StepLimitMiddleware ends the turn with an answer first.
                "recursion_limit": 10 * self.settings.llm.max_agent_steps,
                "metadata": {
                    "conversation": conversation.key,
                    "turn": turn.number,
                    **trace.metadata,
                },
            }
            # The recall tool reads the archive through the turn's own connection.
            context = MemoryContext(
                conversation.id, ConversationArchive(held.sessions, conversation.id)
            )
            agent = self.agent_for_profile(conversation.profile)
            result = await run_agent(agent, begun.working, config, context, on_token)
            agent_calls = [c.usage for c in collector.calls if c.purpose == "agent"]
            if agent_calls:
                trace.score(
                    sum(agent_calls, TokenUsage()).cache_hit_rate, agent_calls[-1].input_tokens
                )
        return result
