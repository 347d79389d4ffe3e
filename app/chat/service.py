"""ChatService: one turn end to end, the same for every adapter (see DESIGN.md)."""

import logging
import time
from base64 import b64encode
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agent.memory.recall import ConversationArchive
from app.agent.memory.state import MemoryContext, MemoryUpdate
from app.chat.locks import ConversationLocks
from app.chat.transcript import from_langchain, to_langchain
from app.db import queries
from app.db.models import Conversation, Feedback, LLMCall, Message, Turn
from app.observability import metrics
from app.observability.calls import LLMCallCollector, LLMCallRecord
from app.observability.simulator import PrefixCacheSimulator
from app.observability.tracing import Tracer
from app.observability.usage import TokenUsage
from app.settings import AUDIENCES, Settings
from app.tokens import count_tokens

log = logging.getLogger(__name__)

AgentForProfile = Callable[[str], Runnable[Any, Any]]
OnToken = Callable[[str], Awaitable[Any]]


class InvalidTurn(ValueError):
    """The input was refused before anything was stored."""


class UnknownProfile(ValueError):
    """No memory profile of that name is defined (settings.profiles.definitions)."""


class TurnFailed(RuntimeError):
    """The model or a tool failed; the user's message is stored, the turn marked failed."""

    def __init__(self, conversation_key: str, turn: int, reason: str) -> None:
        super().__init__(f"turn {turn} of {conversation_key} failed: {reason}")
        self.conversation_key = conversation_key
        self.turn = turn


@dataclass(frozen=True)
class ImageInput:
    data: bytes
    mime_type: str = "image/jpeg"


@dataclass(frozen=True)
class TurnRequest:
    channel: str  # "api", "widget", "telegram"
    conversation_key: str
    audience: str
    author: str | None
    text: str
    # Sent to the model with this turn only; the transcript keeps an "[image]" marker.
    images: tuple[ImageInput, ...] = ()


CITATION_EXCERPT_CHARS = 300


@dataclass(frozen=True)
class Citation:
    title: str
    source: str
    heading: str = ""
    excerpt: str = ""  # the start of the passage, for a reader who follows the citation

    @classmethod
    def of(cls, passage: dict[str, Any]) -> "Citation":
        text = passage.get("text", "")
        cut = CITATION_EXCERPT_CHARS
        excerpt = text if len(text) <= cut else text[:cut] + "…"
        return cls(passage["title"], passage["source"], passage.get("heading", ""), excerpt)


@dataclass(frozen=True)
class TurnUsage:
    llm_calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @classmethod
    def of(cls, calls: Sequence[LLMCallRecord]) -> "TurnUsage":
        return cls(
            llm_calls=len(calls),
            input_tokens=sum(c.input_tokens for c in calls),
            cached_tokens=sum(c.cached_tokens for c in calls),
            output_tokens=sum(c.output_tokens for c in calls),
            cost_usd=sum(c.cost_usd for c in calls),
        )


@dataclass(frozen=True)
class TurnReply:
    conversation_key: str
    turn: int
    profile: str
    text: str
    citations: list[Citation] = field(default_factory=list)
    usage: TurnUsage = TurnUsage()


IMAGE_MARKER = " [image]"


def with_images(message: BaseMessage, images: Sequence[ImageInput]) -> HumanMessage:
    """The user's message with its images as content parts (LangChain's standard blocks)."""
    parts: list[str | dict[str, Any]] = [{"type": "text", "text": message.text}]
    parts += [
        {"type": "image", "base64": b64encode(i.data).decode(), "mime_type": i.mime_type}
        for i in images
    ]
    return HumanMessage(content=parts, id=message.id)


def citations_of(answer: str, passages: Iterable[dict[str, Any]]) -> list[Citation]:
    """The passages a turn retrieved (one citation per source), preferring those the
    answer names."""
    found: dict[str, Citation] = {}
    for passage in passages:
        found.setdefault(passage["source"], Citation.of(passage))
    named = [c for c in found.values() if c.source in answer or c.title in answer]
    return named or list(found.values())


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
            await on_token(message.text)
    return final


class ChatService:
    def __init__(
        self,
        settings: Settings,
        session_factory: async_sessionmaker[AsyncSession],
        locks: ConversationLocks,
        agent_for_profile: AgentForProfile,
        *,
        tracer: Tracer | None = None,
        simulator: PrefixCacheSimulator | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`simulator` stands in for the provider's prompt cache where calls report none;
        `clock` is its time (evals replay the gaps between turns through it)."""
        self._settings = settings
        self._sessions = session_factory
        self._locks = locks
        self._agent_for_profile = agent_for_profile
        self._tracer = tracer or Tracer.disabled(settings.observability)
        self._simulator = simulator
        self._clock = clock

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

    async def handle_turn(self, request: TurnRequest, on_token: OnToken | None = None) -> TurnReply:
        """One turn end to end. `on_token` receives the answer's text as the model writes
        it (streaming adapters); the reply is the same either way."""
        self.validate(request)
        started = time.perf_counter()
        async with self._locks.hold(request.conversation_key):
            conversation, turn, working = await self._store_user_message(request)
            collector = LLMCallCollector(
                conversation.profile, self._settings.observability, self._simulator, self._clock
            )
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
                    # A backstop only: StepLimitMiddleware ends the turn with an answer first.
                    "recursion_limit": 10 * self._settings.llm.max_agent_steps,
                    "metadata": {
                        "conversation": conversation.key,
                        "turn": turn.number,
                        **trace.metadata,
                    },
                }
                context = MemoryContext(
                    conversation.id, ConversationArchive(self._sessions, conversation.id)
                )
                agent = self._agent_for_profile(conversation.profile)
                try:
                    result = await run_agent(agent, working, config, context, on_token)
                except Exception as error:
                    log.exception("turn %s of %s failed", turn.number, conversation.key)
                    await self._finish_failed(conversation, turn, collector.calls, error)
                    raise TurnFailed(conversation.key, turn.number, str(error)) from error
                agent_calls = [c.usage for c in collector.calls if c.purpose == "agent"]
                if agent_calls:
                    trace.score(
                        sum(agent_calls, TokenUsage()).cache_hit_rate, agent_calls[-1].input_tokens
                    )
            # Memory may have removed or replaced loaded messages: new ones have new ids.
            loaded = {m.id for m in working["messages"]}
            new_messages = [m for m in result["messages"] if m.id not in loaded]
            await self._store_outcome(
                conversation, turn, new_messages, result.get("memory"), collector.calls
            )
        if self._settings.observability.metrics_enabled:
            metrics.observe_turn(
                profile=conversation.profile,
                channel=request.channel,
                seconds=time.perf_counter() - started,
            )
        answer = new_messages[-1].text if new_messages else ""
        return TurnReply(
            conversation_key=conversation.key,
            turn=turn.number,
            profile=conversation.profile,
            text=answer,
            citations=citations_of(
                answer,
                (
                    passage
                    for m in new_messages
                    if isinstance(m, ToolMessage) and isinstance(m.artifact, list)
                    for passage in m.artifact
                ),
            ),
            usage=TurnUsage.of(collector.calls),
        )

    async def _store_user_message(
        self, request: TurnRequest
    ) -> tuple[Conversation, Turn, dict[str, Any]]:
        """Commit the user's message before any model call: nothing is lost if it fails.
        Returns the agent's input: the context as the memory profile left it last turn."""
        async with self._sessions() as session:
            conversation = await queries.get_or_create_conversation(
                session,
                request.conversation_key,
                channel=request.channel,
                audience=request.audience,
                profile=self._settings.profiles.by_audience[request.audience],
            )
            if conversation.audience != request.audience:
                raise InvalidTurn(
                    f"this conversation belongs to the {conversation.audience} audience"
                )
            turn = await queries.start_turn(session, conversation)
            text = request.text.strip() + IMAGE_MARKER * len(request.images)
            await queries.append_messages(
                session,
                conversation,
                turn.number,
                [{"role": "user", "author": request.author, "content": text}],
            )
            history = [
                to_langchain(m) for m in await queries.context_messages(session, conversation)
            ]
            summary = await queries.latest_summary(session, conversation)
            archived = await queries.has_archive(session, conversation)
            await session.commit()
        if request.images:
            history[-1] = with_images(history[-1], request.images)
        working = {
            "messages": history,
            "summary": summary.text if summary and summary.text else None,  # "" after a reset
            "archived": archived,
        }
        return conversation, turn, working

    async def _store_outcome(
        self,
        conversation: Conversation,
        turn: Turn,
        new_messages: Sequence[BaseMessage],
        memory: MemoryUpdate | None,
        calls: Sequence[LLMCallRecord],
    ) -> None:
        async with self._sessions() as session:
            await queries.append_messages(
                session, conversation, turn.number, [from_langchain(m) for m in new_messages]
            )
            if memory is not None:
                await self._store_memory(session, conversation, memory)
            self._add_calls(session, conversation, turn, calls)
            await self._close_turn(session, turn, "ok", None)
            await session.commit()

    @staticmethod
    async def _store_memory(
        session: AsyncSession, conversation: Conversation, memory: MemoryUpdate
    ) -> None:
        """Persist this turn's memory decisions, so the next turn starts from them."""
        await queries.clear_messages(
            session, {int(message_id): text for message_id, text in memory.placeholders.items()}
        )
        await queries.drop_messages(session, [int(message_id) for message_id in memory.dropped])
        if memory.summary is not None:
            await queries.add_summary(
                session,
                conversation,
                memory.summary,
                through_message_id=max(int(message_id) for message_id in memory.dropped),
                model=memory.summary_model or "unknown",
                token_count=count_tokens(memory.summary),
            )

    async def _finish_failed(
        self,
        conversation: Conversation,
        turn: Turn,
        calls: Sequence[LLMCallRecord],
        error: Exception,
    ) -> None:
        async with self._sessions() as session:
            self._add_calls(session, conversation, turn, calls)
            await self._close_turn(session, turn, "failed", f"{type(error).__name__}: {error}")
            await session.commit()

    @staticmethod
    def _add_calls(
        session: AsyncSession,
        conversation: Conversation,
        turn: Turn,
        calls: Sequence[LLMCallRecord],
    ) -> None:
        session.add_all(
            LLMCall(conversation_id=conversation.id, turn=turn.number, **vars(call))
            for call in calls
        )

    @staticmethod
    async def _close_turn(
        session: AsyncSession, turn: Turn, status: str, error: str | None
    ) -> None:
        stored = await session.get(Turn, turn.id)
        assert stored is not None
        stored.status, stored.error, stored.finished_at = status, error, datetime.now(UTC)
        stored.trace_id = turn.trace_id

    async def find_turn(
        self, conversation_key: str, number: int
    ) -> tuple[Conversation, Turn] | None:
        async with self._sessions() as session:
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
        async with self._sessions() as session:
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
        async with self._locks.hold(conversation_key), self._sessions() as session:
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
        async with self._locks.hold(conversation_key), self._sessions() as session:
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
        async with self._sessions() as session:
            conversation = await queries.get_conversation(session, conversation_key)
            if conversation is None:
                return None
            return conversation, await queries.usage_by_purpose(session, conversation)

    async def history(self, conversation_key: str) -> tuple[Conversation, list[Message]] | None:
        """The whole stored transcript, including what the model no longer sees."""
        async with self._sessions() as session:
            conversation = await queries.get_conversation(session, conversation_key)
            if conversation is None:
                return None
            return conversation, await queries.all_messages(session, conversation)
