"""The turn's life in the database: begin (the user's message committed), finish, fail,
and closing turns nobody will finish.

A turn holds exactly one pooled connection from `hold()` to its end. On PostgreSQL the
conversation's lock is a session-level advisory lock taken on that same connection: it
outlives the turn's commits (the user's message first, the outcome later), is released
when the turn ends, and dies with the connection if the process does. Everything the turn
stores or reads, the recall tool's archive reads included, goes through that connection,
one session at a time."""

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from weakref import WeakValueDictionary

from langchain_core.messages import BaseMessage
from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from app.agent.memory.state import MemoryUpdate
from app.chat.context import working_history
from app.chat.outcome import TurnOutcome
from app.chat.transcript import from_langchain
from app.chat.types import IMAGE_MARKER, InvalidTurn, TurnRequest, TurnStatus, with_images
from app.db import queries
from app.db.models import Conversation, LLMCall, Turn
from app.observability.usage import UsageRecord
from app.settings import DbSettings
from app.tokens import count_tokens

log = logging.getLogger(__name__)

UNANSWERED: tuple[TurnStatus, ...] = ("failed", "interrupted")
ORPHANED = "no process was left to finish the turn (a restart or a crash)"


def advisory_key(conversation_key: str) -> int:
    """A stable signed 64-bit id for pg_advisory_lock."""
    digest = hashlib.sha256(conversation_key.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class _SerialSession(AsyncSession):
    """A session that first takes its locks, in order, and holds them until it closes:
    the lock of a connection one turn's steps share (its tools may run at once) and, on
    SQLite, the process's write lock, which queues writers first come, first served
    (SQLite's own busy wait is no queue: under load one writer can starve)."""

    def __init__(self, *args: Any, serial: Sequence[asyncio.Lock], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._serial = serial
        self._held = AsyncExitStack()

    async def __aenter__(self) -> "_SerialSession":
        async with AsyncExitStack() as taking:
            for lock in self._serial:
                await taking.enter_async_context(lock)
            self._held = taking.pop_all()
        return self

    async def __aexit__(self, type_: Any, value: Any, traceback: Any) -> None:
        try:
            await super().__aexit__(type_, value, traceback)
        finally:
            await self._held.aclose()


@dataclass(frozen=True)
class HeldConversation:
    """A conversation locked for one turn, and sessions on the turn's one connection."""

    key: str
    sessions: async_sessionmaker[AsyncSession]


@dataclass
class BegunTurn:
    conversation: Conversation
    turn: Turn
    # The agent's input: the context as the memory profile left it last turn.
    working: dict[str, Any]
    note_members: dict[str, list[int]]
    # Earlier turns of this conversation found `running` and closed as interrupted.
    orphans_closed: int


class TurnStore:
    """`bind`: the engine; or one connection whose transaction the caller owns (tests roll
    it back; commits become savepoints). `turn_slots`: turns holding a connection at once,
    the others wait in this process rather than for the pool (None: no limit)."""

    def __init__(
        self, bind: AsyncEngine | AsyncConnection, *, turn_slots: int | None = None
    ) -> None:
        self._bind = bind
        self._local: WeakValueDictionary[str, asyncio.Lock] = WeakValueDictionary()
        self._slots = asyncio.Semaphore(turn_slots) if turn_slots else None
        self._writes = (asyncio.Lock(),) if bind.dialect.name == "sqlite" else ()
        if isinstance(bind, AsyncConnection):
            self.sessions = self._sessions_on(bind, join_transaction_mode="create_savepoint")
        else:
            self.sessions = async_sessionmaker(
                bind, class_=_SerialSession, serial=self._writes, expire_on_commit=False
            )

    def _sessions_on(
        self, connection: AsyncConnection, **kwargs: Any
    ) -> async_sessionmaker[AsyncSession]:
        return async_sessionmaker(
            bind=connection,
            class_=_SerialSession,
            serial=(asyncio.Lock(), *self._writes),
            expire_on_commit=False,
            **kwargs,
        )

    @classmethod
    def for_engine(cls, engine: AsyncEngine, db: DbSettings) -> "TurnStore":
        return cls(engine, turn_slots=db.turn_connections)

    @property
    def _is_postgres(self) -> bool:
        return self._bind.dialect.name == "postgresql"

    @asynccontextmanager
    async def hold(self, conversation_key: str) -> AsyncIterator[HeldConversation]:
        """One turn at a time per conversation: first an asyncio lock in this process
        (waiting holds no connection), then a turn slot, one connection and, on
        PostgreSQL, the advisory lock on that connection (other replicas wait there)."""
        local = self._local.setdefault(conversation_key, asyncio.Lock())
        async with local, self._slots or nullcontext():
            if isinstance(self._bind, AsyncConnection):
                await self._advisory(self._bind, "pg_advisory_lock", conversation_key)
                try:
                    yield HeldConversation(conversation_key, self.sessions)
                finally:
                    await self._advisory(self._bind, "pg_advisory_unlock", conversation_key)
                return
            async with self._bind.connect() as connection:
                await self._advisory(connection, "pg_advisory_lock", conversation_key)
                await connection.commit()  # a session-level lock outlives this transaction
                try:
                    yield HeldConversation(conversation_key, self._sessions_on(connection))
                finally:
                    await self._release(connection, conversation_key)

    async def _advisory(self, connection: AsyncConnection, function: str, key: str) -> Any:
        if not self._is_postgres:
            return True
        statement = text(f"SELECT {function}(:key)")
        return await connection.scalar(statement, {"key": advisory_key(key)})

    async def _release(self, connection: AsyncConnection, key: str) -> None:
        try:
            await self._advisory(connection, "pg_advisory_unlock", key)
            await connection.commit()
        except BaseException as error:  # a cancel too: the lock must not go back to the pool
            # Back in the pool it would keep the lock; closed, the server releases it.
            log.warning("could not unlock conversation %s: closing its connection", key)
            await connection.invalidate()
            if not isinstance(error, Exception):
                raise

    async def begin(self, held: HeldConversation, request: TurnRequest, profile: str) -> BegunTurn:
        """Commit the user's message before any model call: nothing is lost if the turn
        fails. `profile` is the one a new conversation gets."""
        async with held.sessions() as session:
            conversation = await queries.get_or_create_conversation(
                session,
                request.conversation_key,
                channel=request.channel,
                audience=request.audience,
                profile=profile,
            )
            if conversation.audience != request.audience:
                raise InvalidTurn(
                    f"this conversation belongs to the {conversation.audience} audience"
                )
            # The conversation is locked: a turn still `running` has nobody to finish it.
            orphans = await queries.close_running_turns(
                session, conversation, "interrupted", ORPHANED
            )
            turn = await queries.start_turn(session, conversation, request.memory_scope)
            content = request.text.strip() + IMAGE_MARKER * len(request.images)
            await queries.append_messages(
                session,
                conversation,
                turn.number,
                [{"role": "user", "author": request.author, "content": content}],
            )
            history = working_history(
                await queries.context_messages(session, conversation),
                await queries.turn_numbers(session, conversation, UNANSWERED),
            )
            summary = await queries.latest_summary(session, conversation)
            archived = await queries.has_archive(session, conversation, request.memory_scope)
            await session.commit()
        messages = history.messages
        if request.images:
            messages[-1] = with_images(messages[-1], request.images)
        working = {
            "messages": messages,
            "summary": summary.text if summary and summary.text else None,  # "" after a reset
            "archived": archived,
        }
        return BegunTurn(conversation, turn, working, history.note_members, orphans)

    async def finish(
        self,
        held: HeldConversation,
        begun: BegunTurn,
        new_messages: Sequence[BaseMessage],
        memory: MemoryUpdate | None,
        calls: Sequence[UsageRecord],
        outcome: TurnOutcome,
    ) -> None:
        """Store the answer, the memory's decisions and the calls; the turn ends `ok`
        with `outcome`."""
        conversation, turn = begun.conversation, begun.turn
        async with held.sessions() as session:
            await queries.append_messages(
                session, conversation, turn.number, [from_langchain(m) for m in new_messages]
            )
            if memory is not None:
                await _store_memory(session, begun, memory)
            _add_calls(session, begun, calls)
            await _close_turn(session, turn, "ok", None, outcome)
            await session.commit()

    async def fail(
        self,
        held: HeldConversation,
        begun: BegunTurn,
        calls: Sequence[UsageRecord],
        status: TurnStatus,
        error: str,
    ) -> None:
        """The turn ends without an answer; the user's message stays."""
        async with held.sessions() as session:
            _add_calls(session, begun, calls)
            await _close_turn(session, begun.turn, status, error)
            await session.commit()

    async def set_profile(self, conversation_key: str, profile: str) -> bool:
        """Give the conversation `profile` from its next turn on (between turns: it waits for
        one running); False when there is no such conversation."""
        async with self.hold(conversation_key) as held, held.sessions() as session:
            conversation = await queries.get_conversation(session, conversation_key)
            if conversation is None:
                return False
            conversation.profile = profile
            await session.commit()
        return True

    async def close_orphaned_turns(self) -> list[str]:
        """Close as `interrupted` the turns left `running` that no process is finishing
        (a crash, a kill): on PostgreSQL those whose conversation's advisory lock is free;
        on SQLite (one process) those this process does not hold. Returns their channels."""
        async with self.sessions() as session:
            running = (
                await session.execute(
                    select(Turn.id, Conversation.key, Conversation.channel)
                    .join(Conversation, Conversation.id == Turn.conversation_id)
                    .where(Turn.status == "running")
                )
            ).all()
        closed = []
        for turn_id, key, channel in running:
            held_here = self._local.get(key)
            if held_here is not None and held_here.locked():
                continue
            if await self._close_if_free(turn_id, key):
                closed.append(channel)
        return closed

    async def _close_if_free(self, turn_id: int, key: str) -> bool:
        async with self._connection() as connection:
            if not await self._advisory(connection, "pg_try_advisory_lock", key):
                return False  # another replica is running it
            try:
                await connection.execute(
                    update(Turn)
                    .where(Turn.id == turn_id, Turn.status == "running")
                    .values(status="interrupted", error=ORPHANED, finished_at=datetime.now(UTC))
                )
            finally:
                await self._advisory(connection, "pg_advisory_unlock", key)
            if not isinstance(self._bind, AsyncConnection):
                await connection.commit()
        return True

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection]:
        if isinstance(self._bind, AsyncConnection):
            yield self._bind
        else:
            async with self._bind.connect() as connection:
                yield connection


async def _store_memory(session: AsyncSession, begun: BegunTurn, memory: MemoryUpdate) -> None:
    """Persist this turn's memory decisions, so the next turn starts from them."""
    dropped = [
        stored_id
        for message_id in memory.dropped
        for stored_id in begun.note_members.get(message_id, [int(message_id)])
    ]
    await queries.clear_messages(
        session, {int(message_id): text for message_id, text in memory.placeholders.items()}
    )
    await queries.drop_messages(session, dropped)
    if memory.summary is not None:
        await queries.add_summary(
            session,
            begun.conversation,
            memory.summary,
            through_message_id=max(dropped),
            model=memory.summary_model or "unknown",
            token_count=count_tokens(memory.summary),
        )


def _add_calls(session: AsyncSession, begun: BegunTurn, calls: Sequence[UsageRecord]) -> None:
    session.add_all(
        LLMCall(conversation_id=begun.conversation.id, turn=begun.turn.number, **call.columns())
        for call in calls
    )


async def _close_turn(
    session: AsyncSession,
    turn: Turn,
    status: TurnStatus,
    error: str | None,
    outcome: TurnOutcome | None = None,
) -> None:
    stored = await session.get(Turn, turn.id)
    assert stored is not None
    stored.status, stored.error, stored.finished_at = status, error, datetime.now(UTC)
    stored.outcome = outcome
    stored.trace_id = turn.trace_id
