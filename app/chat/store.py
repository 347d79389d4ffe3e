"""The turn's life in the database, in two transactions: begin (the user's message
committed, the context read, and whatever else the turn reads to start: its route, the
person's memory) and finish (the answer, the memory's decisions, the calls) or fail; and
closing turns nobody will finish.

A turn holds exactly one pooled connection from `hold()` to its end. On PostgreSQL the
conversation's lock is a session-level advisory lock taken on that same connection: it
outlives the turn's commits (the user's message first, the outcome later), is released
when the turn ends, and dies with the connection if the process does. Everything the turn
stores or reads, the recall tool's archive reads included, goes through that connection,
one session at a time. One module: the lock lives on the connection the turn's
transactions use, so holding, beginning, finishing and sweeping are one piece."""

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from weakref import WeakValueDictionary

from langchain_core.messages import BaseMessage
from sqlalchemy import bindparam, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from app.agent.memory.state import MemoryUpdate
from app.chat.context import working_history
from app.chat.outcome import TurnOutcome
from app.chat.transcript import from_langchain
from app.chat.types import IMAGE_MARKER, InvalidTurn, TurnRequest, TurnStatus, with_images
from app.db import queries
from app.db.engine import read_only
from app.db.models import Conversation, LLMCall, Turn
from app.observability.usage import UsageRecord
from app.settings import DbSettings
from knowledge.tokens import count_tokens

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
    # The `seq` of the conversation's last stored message: the turn holds the conversation,
    # so it numbers what it stores on from here without reading it again.
    seq: int
    summaries: int  # how many summaries the conversation had when the turn began

    def stored_ids(self, message_id: str) -> list[int]:
        """The stored messages a context message stands for: itself, or a note's members."""
        return self.note_members.get(message_id, [int(message_id)])


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
            self.reads = self.sessions
        else:
            self.sessions = async_sessionmaker(
                bind, class_=_SerialSession, serial=self._writes, expire_on_commit=False
            )
            self.reads = async_sessionmaker(read_only(bind), expire_on_commit=False)

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
                await self._outside_transactions(connection, "pg_advisory_lock", conversation_key)
                try:
                    yield HeldConversation(conversation_key, self._sessions_on(connection))
                finally:
                    await self._release(connection, conversation_key)

    async def _advisory(self, connection: AsyncConnection, function: str, key: str) -> Any:
        if not self._is_postgres:
            return True
        statement = text(f"SELECT {function}(:key)")
        return await connection.scalar(statement, {"key": advisory_key(key)})

    async def _outside_transactions(
        self, connection: AsyncConnection, function: str, key: str
    ) -> None:
        """A session-level lock's function in autocommit: it outlives transactions, so it
        needs none of its own (no BEGIN and COMMIT around it)."""
        if not self._is_postgres:
            return
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        try:
            await self._advisory(connection, function, key)
            await connection.commit()  # only SQLAlchemy's: nothing was begun on the server
        finally:
            default = connection.default_isolation_level
            await connection.execution_options(isolation_level=default)

    async def _release(self, connection: AsyncConnection, key: str) -> None:
        try:
            await self._outside_transactions(connection, "pg_advisory_unlock", key)
        except BaseException as error:  # a cancel too: the lock must not go back to the pool
            # Back in the pool it would keep the lock; closed, the server releases it.
            log.warning("could not unlock conversation %s: closing its connection", key)
            await connection.invalidate()
            if not isinstance(error, Exception):
                raise

    @asynccontextmanager
    async def begin(
        self, held: HeldConversation, request: TurnRequest, profile: str
    ) -> AsyncIterator[tuple[BegunTurn, AsyncSession]]:
        """The turn's first transaction: the user's message stored and the context read;
        the caller reads what else the turn starts from through the session, and the
        transaction commits when the block ends, before any model call: nothing is lost
        if the turn fails. `profile` is the one a new conversation gets."""
        async with held.sessions() as session:
            start = await queries.turn_start(
                session,
                request.conversation_key,
                channel=request.channel,
                audience=request.audience,
                profile=profile,
            )
            conversation = start.conversation
            if conversation.audience != request.audience:
                raise InvalidTurn(
                    f"this conversation belongs to the {conversation.audience} audience"
                )
            # The conversation is locked: a turn still `running` has nobody to finish it.
            # Each turn closes its predecessor so left: only the last turn can be running.
            orphaned = start.last_status == "running"
            if orphaned:
                await queries.close_turn(
                    session, conversation, start.last_turn, "interrupted", ORPHANED
                )
            turn = await queries.start_turn(
                session, conversation, start.last_turn + 1, request.memory_scope, request.person
            )
            content = request.text.strip() + IMAGE_MARKER * len(request.images)
            row = {"role": "user", "author": request.author, "content": content}
            await queries.append_messages(session, conversation, turn.number, [row], start.last_seq)
            seq = start.last_seq + 1
            stored = await queries.context_with_turns(session, conversation)
            unanswered = {message.turn for message, status in stored if status in UNANSWERED}
            history = working_history([message for message, _ in stored], unanswered)
            summary, summaries = await queries.summaries(session, conversation)
            messages = history.messages
            if request.images:
                messages[-1] = with_images(messages[-1], request.images)
            working = {
                "messages": messages,
                "summary": summary.text if summary and summary.text else None,  # "" after reset
                # Nothing is deleted and seqs run from 1: fewer in the context than `seq`
                # means some were dropped; a cleared one is in the archive too.
                "archived": len(stored) < seq
                or any(message.context_state == "cleared" for message, _ in stored)
                or bool(
                    request.memory_scope
                    and await queries.has_scope_archive(
                        session, request.memory_scope, conversation.id
                    )
                ),
            }
            begun = BegunTurn(
                conversation, turn, working, history.note_members, int(orphaned), seq, summaries
            )
            yield begun, session
            await session.commit()

    async def finish(
        self,
        held: HeldConversation,
        begun: BegunTurn,
        new_messages: Sequence[BaseMessage],
        memory: MemoryUpdate | None,
        calls: Sequence[UsageRecord],
        outcome: TurnOutcome,
        also: Callable[[AsyncSession], Awaitable[None]] | None = None,
    ) -> None:
        """Store the answer, the memory's decisions and the calls, and what `also` stores
        through the session, in one transaction; the turn ends `ok` with `outcome`."""
        async with held.sessions() as session:
            rows = [from_langchain(m) for m in new_messages]
            await queries.append_messages(
                session, begun.conversation, begun.turn.number, rows, begun.seq
            )
            if memory is not None:
                await _store_memory(session, begun, memory)
            await _add_calls(session, begun, calls)
            await _close_turn(session, begun.turn, "ok", None, outcome)
            if also is not None:
                await also(session)
            await session.commit()
        begun.seq += len(rows)

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
            await _add_calls(session, begun, calls)
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
        async with self.reads() as session:
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
                result = await connection.execute(
                    update(Turn)
                    .where(Turn.id == turn_id, Turn.status == "running")
                    .values(status="interrupted", error=ORPHANED, finished_at=datetime.now(UTC))
                )
            finally:
                await self._advisory(connection, "pg_advisory_unlock", key)
            if not isinstance(self._bind, AsyncConnection):
                await connection.commit()
        return result.rowcount == 1  # 0: it ended meanwhile

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
        stored_id for message_id in memory.dropped for stored_id in begun.stored_ids(message_id)
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


_INSERT_CALLS = insert(LLMCall)
# Built once (see app/db/queries.py); nothing in the session to update with it.
_CLOSE_TURN = (
    update(Turn)
    .where(Turn.id == bindparam("turn_id"))
    .values(
        status=bindparam("status"),
        error=bindparam("error"),
        finished_at=bindparam("finished_at"),
        outcome=bindparam("outcome"),
        trace_id=bindparam("trace_id"),
        memory_block=bindparam("memory_block"),
    )
    .execution_options(synchronize_session=False)
)


async def _add_calls(session: AsyncSession, begun: BegunTurn, calls: Sequence[UsageRecord]) -> None:
    if calls:
        conversation, turn = begun.conversation.id, begun.turn.number
        await session.execute(
            _INSERT_CALLS,
            [{"conversation_id": conversation, "turn": turn, **call.columns()} for call in calls],
        )


async def _close_turn(
    session: AsyncSession,
    turn: Turn,
    status: TurnStatus,
    error: str | None,
    outcome: TurnOutcome | None = None,
) -> None:
    values = {
        "status": status,
        "error": error,
        "outcome": outcome,
        "trace_id": turn.trace_id,
        "memory_block": turn.memory_block,
    }
    await session.execute(
        _CLOSE_TURN, {"turn_id": turn.id, "finished_at": datetime.now(UTC), **values}
    )
