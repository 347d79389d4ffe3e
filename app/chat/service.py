"""ChatService: one turn end to end, the same for every adapter (see DESIGN.md).

This module orchestrates: app/chat/store.py keeps the turn in the database (and the
conversation's lock), app/chat/types.py names what goes in and comes out."""

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
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
    TurnFailed,
    TurnReply,
    TurnRequest,
    TurnStarted,
    TurnStatus,
    TurnToken,
    TurnUsage,
    UnknownProfile,
    citations_of,
)
from app.db import queries
from app.db.models import Conversation, Feedback, Message, Turn
from app.observability import metrics
from app.observability.calls import LLMCallCollector
from app.observability.redact import configured_secrets, redact_secrets
from app.observability.simulator import PrefixCacheSimulator
from app.observability.tracing import Tracer
from app.observability.usage import TokenUsage
from app.settings import AUDIENCES, Settings

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


class ChatService:
    def __init__(
        self,
        settings: Settings,
        store: TurnStore,
        agent_for_profile: AgentForProfile,
        *,
        tracer: Tracer | None = None,
        simulator: PrefixCacheSimulator | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`simulator` stands in for the provider's prompt cache where calls report none;
        `clock` is its time (evals replay the gaps between turns through it)."""
        self._settings = settings
        self._store = store
        self._agent_for_profile = agent_for_profile
        self._tracer = tracer or Tracer.disabled(settings.observability)
        self._simulator = simulator
        self._clock = clock
        self._running: set[asyncio.Task[None]] = set()
        self._secrets = configured_secrets(settings)

    def _describe(self, error: BaseException) -> str:
        """A failure as `turns.error` stores it and the log shows it: providers echo
        keys and tokens in their errors, so those are scrubbed."""
        return redact_secrets(f"{type(error).__name__}: {error}", self._secrets)

    def validate(self, request: TurnRequest) -> None:
        text = request.text.strip()
        if not text and not request.images:
            raise InvalidTurn("the message is empty")
        limit = self._settings.chat.max_message_chars
        if len(text) > limit:
            raise InvalidTurn(f"the message has {len(text)} characters; the limit is {limit}")
        if request.audience not in AUDIENCES:
            raise InvalidTurn(
                f"unknown audience {request.audience!r}: use one of {', '.join(AUDIENCES)}"
            )

    async def handle_turn(self, request: TurnRequest) -> TurnReply:
        """One turn end to end: the reply, or TurnFailed saying whether the message was
        kept. InvalidTurn when refused (nothing stored)."""
        outcome = await self.turn_outcome(request)
        if isinstance(outcome, TurnError):
            raise TurnFailed(outcome)
        return outcome

    async def turn_outcome(self, request: TurnRequest) -> TurnReply | TurnError:
        """The turn's events consumed (no tokens): its reply or the error it ended with."""
        async for event in self.stream_turn(request, tokens=False):
            if isinstance(event, TurnDone):
                return event.reply
            if isinstance(event, TurnError):
                return event
        raise AssertionError("a turn's events end with done or error")

    async def stream_turn(
        self, request: TurnRequest, *, tokens: bool = True
    ) -> AsyncIterator[TurnEvent]:
        """The turn's events: `TurnStarted` once the user's message is stored, the
        answer's `TurnToken`s as the model writes them (with `tokens`), then one
        `TurnDone` or `TurnError`. A refusal raises InvalidTurn before the first event.
        The turn runs in a task of its own: a caller that stops listening does not stop
        it, and its answer is stored."""
        self.validate(request)
        events: asyncio.Queue[TurnEvent | InvalidTurn] = asyncio.Queue()
        task = asyncio.create_task(self._run_turn(request, events.put_nowait, tokens))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        while True:
            event = await events.get()
            if isinstance(event, InvalidTurn):
                raise event
            yield event
            if isinstance(event, TurnDone | TurnError):
                return

    async def _run_turn(self, request: TurnRequest, emit: Emit, tokens: bool) -> None:
        """The turn's task. It is ours alone: a cancel (shutdown) is handled here, the
        turn ending `interrupted`, rather than passed on."""
        key = request.conversation_key
        begun: BegunTurn | None = None
        outcome: TurnDone | TurnError | None = None
        try:
            async with self._store.hold(key) as held:
                profile = self._settings.profiles.by_audience[request.audience]
                begun = await self._store.begin(held, request, profile)
                emit(TurnStarted(key, begun.turn.number))
                for _ in range(begun.orphans_closed):
                    self._count("interrupted", request.channel)
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
            conversation.profile, self._settings.observability, self._simulator, self._clock
        )
        deadline = asyncio.timeout(self._settings.chat.turn_timeout_seconds)
        on_token = (lambda text: emit_token(TurnToken(text))) if emit_token else None
        try:
            async with deadline:
                result = await self._run_agent(held, begun, request, collector, on_token)
            # Memory may have removed or replaced loaded messages: new ones have new ids.
            loaded = {m.id for m in begun.working["messages"]}
            new_messages = [m for m in result["messages"] if m.id not in loaded]
            await self._store.finish(
                held, begun, new_messages, result.get("memory"), collector.calls
            )
        except (Exception, asyncio.CancelledError) as error:
            interrupted = deadline.expired() or isinstance(error, asyncio.CancelledError)
            status: TurnStatus = "interrupted" if interrupted else "failed"
            stored_error = self._describe(error)
            log.error("turn %s of %s %s: %s", turn.number, conversation.key, status, stored_error)
            log.debug("turn %s of %s failed here", turn.number, conversation.key, exc_info=error)
            try:
                await self._store.fail(held, begun, collector.calls, status, stored_error)
            except Exception as unstored:  # the next turn or a restart closes it
                log.error(
                    "turn %s of %s left running: %s",
                    turn.number,
                    conversation.key,
                    self._describe(unstored),
                )
            self._count(status, request.channel)
            detail = INTERRUPTED_KEPT if interrupted else FAILED_KEPT
            return TurnError(conversation.key, turn.number, status, True, detail)
        self._count("ok", request.channel)
        if self._settings.observability.metrics_enabled:
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
        with self._tracer.turn(
            conversation.key,
            request.author or "anonymous",
            conversation.audience,
            conversation.profile,
            request.channel,
            self._settings.llm.model,
        ) as trace:
            turn.trace_id = trace.trace_id
            config: RunnableConfig = {
                "callbacks": [collector, *trace.callbacks],
                "recursion_limit": 2 * self._settings.llm.max_agent_steps + 1,
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
            agent = self._agent_for_profile(conversation.profile)
            result = await run_agent(agent, begun.working, config, context, on_token)
            agent_calls = [c.usage for c in collector.calls if c.purpose == "agent"]
            if agent_calls:
                trace.score(
                    sum(agent_calls, TokenUsage()).cache_hit_rate, agent_calls[-1].input_tokens
                )
        return result

    def _count(self, status: TurnStatus, channel: str) -> None:
        if self._settings.observability.metrics_enabled:
            metrics.count_turn(status=status, channel=channel)

    async def close_orphaned_turns(self) -> int:
        """At start-up: turns left `running` by a process that is gone end `interrupted`."""
        channels = await self._store.close_orphaned_turns()
        for channel in channels:
            self._count("interrupted", channel)
        if channels:
            log.warning("closed %d turns left running as interrupted", len(channels))
        return len(channels)

    async def aclose(self) -> None:
        """Stop the turns still running: each ends `interrupted`, its message kept."""
        for task in self._running:
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)

    async def find_turn(
        self, conversation_key: str, number: int
    ) -> tuple[Conversation, Turn] | None:
        async with self._store.sessions() as session:
            return await queries.find_turn(session, conversation_key, number)

    async def add_feedback(
        self,
        conversation: Conversation,
        turn: Turn,
        helpful: bool,
        comment: str | None,
        author: str | None,
    ) -> None:
        """Store a rating of one answer; also a score on the turn's trace when traced."""
        async with self._store.sessions() as session:
            session.add(
                Feedback(
                    conversation_id=conversation.id,
                    turn=turn.number,
                    rating="up" if helpful else "down",
                    comment=comment,
                    author=author,
                )
            )
            await session.commit()
        if turn.trace_id:
            self._tracer.feedback(turn.trace_id, helpful, comment)

    async def reset_context(self, conversation_key: str) -> bool:
        """Start a fresh context: the model no longer sees anything said so far (all of it
        stays in the archive). False when there is no such conversation."""
        async with self._store.hold(conversation_key) as held, held.sessions() as session:
            conversation = await queries.get_conversation(session, conversation_key)
            if conversation is None:
                return False
            await queries.drop_from_context(session, conversation)
            await session.commit()
        return True

    async def set_profile(self, conversation_key: str, profile: str) -> bool:
        """Override the audience's memory profile for one conversation; False when there
        is no such conversation. What earlier profiles cleared or dropped stays so."""
        if profile not in self._settings.profiles.definitions:
            raise UnknownProfile(
                f"unknown memory profile {profile!r}: use one of "
                + ", ".join(self._settings.profiles.definitions)
            )
        async with self._store.hold(conversation_key) as held, held.sessions() as session:
            conversation = await queries.get_conversation(session, conversation_key)
            if conversation is None:
                return False
            conversation.profile = profile
            await session.commit()
        return True

    async def usage(
        self, conversation_key: str
    ) -> tuple[Conversation, dict[str, queries.UsageTotals]] | None:
        """The conversation's LLM usage by purpose (agent, summary, expert)."""
        async with self._store.sessions() as session:
            conversation = await queries.get_conversation(session, conversation_key)
            if conversation is None:
                return None
            return conversation, await queries.usage_by_purpose(session, conversation)

    async def history(self, conversation_key: str) -> tuple[Conversation, list[Message]] | None:
        """The whole stored transcript, including what the model no longer sees."""
        async with self._store.sessions() as session:
            conversation = await queries.get_conversation(session, conversation_key)
            if conversation is None:
                return None
            return conversation, await queries.all_messages(session, conversation)
