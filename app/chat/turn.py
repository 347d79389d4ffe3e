"""Running one turn: hold the conversation; in its first transaction store the user's
message and read what the turn starts from (who answers, from the router in
app/chat/routing.py; the person's memory); run the agent under the turn's deadline (or let
the route take the turn); store the outcome in a second transaction, and tell the caller
through `emit`. A failure after the message is stored ends the turn `failed` or
`interrupted`; one the database cannot record leaves it `running` until the next turn, a
start or the periodic sweep closes it. One module: every path of a turn (answered, taken
by a route, failed, interrupted) ends in the same place."""

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from sqlalchemy.ext.asyncio import AsyncSession

from app.agent.memory.recall import ConversationArchive
from app.agent.memory.state import MemoryContext, MemoryUpdate
from app.chat.outcome import TurnOutcome, outcome_of
from app.chat.routing import BOT, FollowUp, Route, TurnRouter
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
    citations_of,
)
from app.memory import facts
from app.memory.kept import memory_note
from app.memory.store import MemoryBlock
from app.memory.turns import PeopleMemory
from app.observability import metrics
from app.observability.calls import UsageCollector
from app.observability.redact import configured_secrets, redact_secrets
from app.observability.simulator import PrefixCacheSimulator
from app.observability.tracing import MemoryReport, Tracer, TurnTrace
from app.observability.usage import UsageTotals
from app.settings import Settings
from knowledge.tokens import count_tokens

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


def reply_of(
    begun: BegunTurn, new_messages: list[BaseMessage], usage: UsageTotals, outcome: TurnOutcome
) -> TurnReply:
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
        outcome=outcome,
    )


def memory_report(
    begun: BegunTurn,
    memory: MemoryUpdate | None,
    summaries: int,
    remembered: tuple[int, ...] = (),
) -> MemoryReport:
    """What this turn's memory decisions did to the context the previous turn left, and
    which remembered items its memory block showed."""
    if memory is None:
        return MemoryReport(summary_version=summaries, people_memory_items=remembered)
    loaded = {str(m.id): m for m in begun.working["messages"]}
    freed = sum(
        max(0, count_tokens(loaded[message_id].text) - count_tokens(placeholder))
        for message_id, placeholder in memory.placeholders.items()
        if message_id in loaded
    )
    dropped = [loaded[i] for i in memory.dropped if i in loaded]
    folded = memory.summary is not None
    stored = sum(len(begun.note_members.get(i, [i])) for i in memory.dropped)
    return MemoryReport(
        results_cleared=len(memory.placeholders),
        tokens_freed=freed,
        exchanges_trimmed=0 if folded else sum(m.type == "human" for m in dropped),
        messages_folded=stored if folded else 0,
        summary_version=summaries,
        prefix_kept=not memory.placeholders and not memory.dropped,
        people_memory_items=remembered,
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
    router: TurnRouter | None = None  # None: the bot answers every turn
    _secrets: list[str] = field(init=False)
    _people: PeopleMemory = field(init=False)

    def __post_init__(self) -> None:
        self._secrets = configured_secrets(self.settings)
        self._people = PeopleMemory(self.settings.memory)

    def _describe(self, error: BaseException) -> str:
        """A failure as `turns.error` stores it and the log shows it: providers echo
        keys and tokens in their errors, so those are scrubbed."""
        return redact_secrets(f"{type(error).__name__}: {error}", self._secrets)

    def count(self, status: TurnStatus, channel: str) -> None:
        if self.settings.observability.metrics_enabled:
            metrics.count_turn(status=status, channel=channel)

    def count_outcome(self, request: TurnRequest, ended: TurnDone | TurnError) -> None:
        """The turn's outcome as a metric: `failed` for a turn that ended without an answer."""
        if self.settings.observability.metrics_enabled:
            outcome = ended.reply.outcome if isinstance(ended, TurnDone) else None
            metrics.count_outcome(
                outcome=outcome or "failed", audience=request.audience, channel=request.channel
            )

    async def run(self, request: TurnRequest, emit: Emit, tokens: bool) -> None:
        """The turn's task. It is ours alone: a cancel (shutdown) is handled here, the
        turn ending `interrupted`, rather than passed on. The router decides in the turn's
        first transaction who answers (the bot, a person, nobody yet); every route runs
        this one lifecycle."""
        key = request.conversation_key
        # Whose memory the turn reads and writes, stored with the turn: None when its
        # audience's people are not remembered.
        scope = self._people.scope_of(request.audience, request.memory_scope)
        request = replace(request, memory_scope=scope)
        begun: BegunTurn | None = None
        outcome: TurnDone | TurnError | None = None
        follow_up: FollowUp | None = None
        try:
            prepared = await self.router.prepare(request) if self.router else None
            async with self.store.hold(key) as held:
                begun, route, block = await self._begin(held, request, prepared)
                emit(TurnStarted(key, begun.turn.number))
                for _ in range(begun.orphans_closed):
                    self.count("interrupted", request.channel)
                if route.takes_turn:
                    outcome, follow_up = await self._taken(held, begun, request, route)
                else:
                    emit_token = emit if tokens else None
                    outcome = await self._answer(held, begun, request, block, emit_token)
                    if self.router is not None and isinstance(outcome, TurnDone):
                        reply, follow_up = await self._after_answer(
                            held, begun, request, outcome.reply, route
                        )
                        outcome = TurnDone(reply)
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
        self.count_outcome(request, outcome)
        emit(outcome)  # after the connection is back: the next turn can start at once
        if follow_up is not None:
            await follow_up()

    async def _begin(
        self, held: HeldConversation, request: TurnRequest, prepared: Any
    ) -> tuple[BegunTurn, Route, MemoryBlock | None]:
        """The turn's first transaction: the user's message stored, the route decided and,
        when the bot answers a remembered person, their memory block read; InvalidTurn,
        nothing stored, for a "remember that …" their memory cannot keep."""
        profile = self.settings.profiles.by_audience[request.audience]
        async with self.store.begin(held, request, profile) as (begun, session):
            conversation = begun.conversation
            scope = request.memory_scope  # resolved by `run`
            if scope is not None and (
                refused := await self._people.refusal_of_turn(session, scope, request.text)
            ):
                raise InvalidTurn(refused)  # before the transaction commits: nothing stored
            route = (
                await self.router.route(session, conversation, request, prepared)
                if self.router
                else BOT
            )
            block = None
            if scope is not None and not route.takes_turn:
                block = await self._people.block(session, scope, conversation)
        return begun, route, block

    async def _taken(
        self, held: HeldConversation, begun: BegunTurn, request: TurnRequest, route: Route
    ) -> tuple[TurnDone | TurnError, FollowUp | None]:
        """The turn a route took from the bot: its notice (maybe none) stored as the
        answer, no model called."""
        assert self.router is not None
        conversation, turn = begun.conversation, begun.turn
        with self._trace(begun, request) as trace:
            try:
                taken = await self.router.take(held, begun, request, route)
                answer = [AIMessage(taken.notice)] if taken.notice else []
                await self.store.finish(held, begun, answer, None, [], taken.outcome)
            except Exception as error:
                stored_error = self._describe(error)
                log.error(
                    "turn %s of %s (%s) failed: %s",
                    turn.number,
                    conversation.key,
                    route.kind,
                    stored_error,
                )
                await self.store.fail(held, begun, [], "failed", stored_error)
                self.count("failed", request.channel)
                if trace is not None:
                    trace.failed("failed", stored_error)
                return TurnError(conversation.key, turn.number, "failed", True, FAILED_KEPT), None
            if trace is not None:
                # A request for a person is a turn the bot did not resolve; a message while
                # a person has the chat, or one giving the bot back, asks the bot nothing.
                scored = taken.outcome if taken.outcome == "handed_off" else None
                trace.finish(taken.notice, [], [], None, scored)
        self.count("ok", request.channel)
        reply = TurnReply(
            conversation.key,
            turn.number,
            conversation.profile,
            taken.notice,
            outcome=taken.outcome,
            handoff=taken.handoff,
        )
        return TurnDone(reply), taken.follow_up

    async def _after_answer(
        self,
        held: HeldConversation,
        begun: BegunTurn,
        request: TurnRequest,
        reply: TurnReply,
        route: Route,
    ) -> tuple[TurnReply, FollowUp | None]:
        """The router's look at the stored answer; a failure there leaves the reply as it
        was (it is stored already)."""
        assert self.router is not None
        try:
            return await self.router.after_answer(held, begun, request, reply, route)
        except Exception as error:
            log.error(
                "turn %s of %s: no handoff after it: %s",
                reply.turn,
                reply.conversation_key,
                self._describe(error),
            )
            return reply, None

    async def _answer(
        self,
        held: HeldConversation,
        begun: BegunTurn,
        request: TurnRequest,
        block: MemoryBlock | None,
        emit_token: Emit | None,
    ) -> TurnDone | TurnError:
        with self._trace(begun, request) as trace:
            return await self._traced_answer(held, begun, request, block, emit_token, trace)

    @contextmanager
    def _trace(self, begun: BegunTurn, request: TurnRequest) -> Iterator[TurnTrace | None]:
        """The turn's Langfuse trace, its id kept with the turn (every turn has one, the
        bot's answers and the turns a route took: a handoff's calls go on it too)."""
        conversation = begun.conversation
        with self.tracer.turn(
            conversation.key,
            request.author,
            conversation.audience,
            conversation.profile,
            request.channel,
            self.settings.llm.model,
            request.text,
        ) as trace:
            begun.turn.trace_id = trace.trace_id if trace else None
            yield trace

    async def _traced_answer(
        self,
        held: HeldConversation,
        begun: BegunTurn,
        request: TurnRequest,
        block: MemoryBlock | None,
        emit_token: Emit | None,
        trace: TurnTrace | None,
    ) -> TurnDone | TurnError:
        """Run the agent and store its outcome; any failure ends the turn `failed`, the
        deadline or a shutdown `interrupted`."""
        started = time.perf_counter()
        conversation, turn = begun.conversation, begun.turn
        collector = UsageCollector(
            conversation.profile, self.settings.observability, self.simulator, self.clock, trace
        )
        deadline = asyncio.timeout(self.settings.chat.turn_timeout_seconds)
        on_token = (lambda text: emit_token(TurnToken(text))) if emit_token else None
        scope = request.memory_scope
        # A "remember that …" turn's model is told where it goes (the rest keep the
        # conversation's cached prefix), before what the person is remembered by.
        note = memory_note(scope) if facts.remembered(request.text) else None
        told = [text for text in (note, block.text if block else None) if text]
        begun.working["people_memory"] = "\n\n".join(told) or None
        begun.turn.memory_block = block.text if block else None  # stored as the turn closes
        remembered = tuple(block.item_ids) if block else ()
        try:
            async with deadline:
                result = await self._run_agent(held, begun, collector, on_token)
            # Memory may have removed or replaced loaded messages: new ones have new ids.
            loaded = {m.id for m in begun.working["messages"]}
            new_messages = [m for m in result["messages"] if m.id not in loaded]
            memory = result.get("memory")
            outcome = outcome_of(new_messages)
            remember = (
                partial(self._remember, begun=begun, request=request, scope=scope, memory=memory)
                if scope is not None
                else None
            )
            await self.store.finish(
                held, begun, new_messages, memory, collector.records, outcome, remember
            )
        except (Exception, asyncio.CancelledError) as error:
            interrupted = deadline.expired() or isinstance(error, asyncio.CancelledError)
            status: TurnStatus = "interrupted" if interrupted else "failed"
            stored_error = self._describe(error)
            log.error("turn %s of %s %s: %s", turn.number, conversation.key, status, stored_error)
            log.debug("turn %s of %s failed here", turn.number, conversation.key, exc_info=error)
            if trace is not None:
                trace.failed(status, stored_error)
            try:
                await self.store.fail(held, begun, collector.records, status, stored_error)
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
        reply = reply_of(begun, new_messages, UsageTotals.of(collector.records), outcome)
        if trace is not None:
            try:
                self._finish_trace(begun, trace, reply, memory, collector, remembered)
            except Exception as error:  # the turn is answered and stored: tracing only
                log.warning(
                    "turn %s of %s: trace not finished: %s", turn.number, conversation.key, error
                )
        return TurnDone(reply)

    def _finish_trace(
        self,
        begun: BegunTurn,
        trace: TurnTrace,
        reply: TurnReply,
        memory: MemoryUpdate | None,
        collector: UsageCollector,
        remembered: tuple[int, ...],
    ) -> None:
        summaries = begun.summaries + (memory is not None and memory.summary is not None)
        citations = [{"title": c.title, "source": c.source} for c in reply.citations]
        report = memory_report(begun, memory, summaries, remembered)
        trace.finish(reply.text, citations, collector.records, report, reply.outcome)

    async def _remember(
        self,
        session: AsyncSession,
        *,
        begun: BegunTurn,
        request: TurnRequest,
        scope: str,
        memory: MemoryUpdate | None,
    ) -> None:
        """Keep what the turn's fold extracted and an explicit "remember that …", in the
        turn's last transaction; a failure here is only logged, rolled back to before it:
        the answer is stored."""
        asked = begun.working["messages"][-1]
        message_id = int(asked.id) if str(asked.id).isdigit() else None
        try:
            async with session.begin_nested():
                await self._people.write(
                    session,
                    scope,
                    begun.conversation,
                    (request.text, message_id),
                    memory.summary if memory else None,
                    {i: begun.stored_ids(i) for i in memory.dropped} if memory else None,
                )
        except Exception as error:
            log.warning(
                "turn %s of %s: nothing remembered: %s",
                begun.turn.number,
                begun.conversation.key,
                self._describe(error),
            )

    async def _run_agent(
        self,
        held: HeldConversation,
        begun: BegunTurn,
        collector: UsageCollector,
        on_token: OnToken | None,
    ) -> dict[str, Any]:
        conversation, turn = begun.conversation, begun.turn
        config: RunnableConfig = {
            "callbacks": collector.callbacks,
            # A backstop only: StepLimitMiddleware ends the turn with an answer first.
            "recursion_limit": 10 * self.settings.llm.max_agent_steps,
            "metadata": {"conversation": conversation.key, "turn": turn.number},
        }
        # The recall tool reads the archive through the turn's own connection.
        archive = ConversationArchive(held.sessions, conversation.id, turn.memory_scope)
        context = MemoryContext(conversation.id, archive)
        agent = self.agent_for_profile(conversation.profile)
        return await run_agent(agent, begun.working, config, context, on_token)
