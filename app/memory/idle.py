"""The write when a conversation goes idle: once no turn has run for longer than the
prompt cache's TTL, what its people stated since its last fold is taken into their memory
with one summary-model call (the offline extractive summarizer without a model) over the
messages of the turns not taken in yet, whose "Facts and constraints users stated" are kept
as a fold's are (by the turn of their source message). The conversation's context is not
changed: the summary is not stored.

Once per idle period: `Conversation.idle_written_turn` is the last turn taken in, claimed
with one conditional UPDATE before the call (two replicas never both call the model) and
given back if the call fails (the next check tries again). A forget of a scope marks its
conversations taken in up to their last turn, so what was said before it is not kept again.
"""

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage
from langchain_core.runnables import RunnableConfig
from sqlalchemy import case, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agent.memory.summarizer import SUMMARY_RUN_CONFIG, stated_facts, summary_request
from app.chat.transcript import to_langchain
from app.db.models import Conversation, LLMCall, Message, Turn
from app.memory.turns import ANONYMOUS_AUTHOR, PeopleMemory, Source, placed
from app.observability.calls import PURPOSE_KEY, UsageCollector
from app.observability.simulator import RULES
from app.settings import Settings

log = logging.getLogger(__name__)

PURPOSE = "memory"  # the LLM call's purpose, apart from the folds' `summary`
# The idle time when the configured cache rules keep prefixes for ever (block16).
UNTIMED_CACHE_IDLE = timedelta(minutes=5)


def idle_after(settings: Settings) -> timedelta:
    """How long a conversation waits for its next turn before its facts are written:
    `memory.idle_minutes`, by default the TTL of the prompt cache's rules."""
    if settings.memory.idle_minutes is not None:
        return timedelta(minutes=settings.memory.idle_minutes)
    ttl = RULES[settings.observability.simulator_rules].ttl_seconds
    return UNTIMED_CACHE_IDLE if ttl is None else timedelta(seconds=ttl)


@dataclass(frozen=True)
class Idle:
    """A conversation found idle: its turns after `taken_in` up to `last` are to be read."""

    conversation_id: int
    taken_in: int
    last: int


async def idle_conversations(session: AsyncSession, before: datetime) -> list[Idle]:
    """The conversations no turn of which has run since `before`, with a remembered turn
    not taken in yet."""
    activity = (
        select(
            Turn.conversation_id.label("id"),
            func.max(Turn.number).label("last"),
            func.max(func.coalesce(Turn.finished_at, Turn.started_at)).label("active_at"),
            func.sum(case((Turn.status == "running", 1), else_=0)).label("running"),
        )
        .group_by(Turn.conversation_id)
        .subquery()
    )
    taken_in = func.coalesce(Conversation.idle_written_turn, 0)
    remembered = exists().where(
        Turn.conversation_id == Conversation.id,
        Turn.memory_scope.is_not(None),
        Turn.number > taken_in,
    )
    found = await session.execute(
        select(Conversation.id, taken_in, activity.c.last)
        .join(activity, activity.c.id == Conversation.id)
        .where(activity.c.running == 0, activity.c.active_at < before, remembered)
        .order_by(Conversation.id)
    )
    return [Idle(*row) for row in found]


def _sources(said: Sequence[Message], scopes: dict[int, str]) -> dict[int, Source]:
    """Each remembered user message's source: its turn's scope and author, by recall id."""
    return {m.id: Source(scopes[m.turn], frozenset({m.author or ANONYMOUS_AUTHOR})) for m in said}


@dataclass
class IdleWriter:
    settings: Settings
    sessions: async_sessionmaker[AsyncSession]
    summary_model: BaseChatModel

    async def write_idle(self, now: datetime | None = None) -> int:
        """Take in the conversations idle at `now` (default: now); how many were written."""
        before = (now or datetime.now(UTC)) - idle_after(self.settings)
        async with self.sessions() as session:
            due = await idle_conversations(session, before)
        written = 0
        for idle in due:
            written += await self.take_in(idle)
        return written

    async def run(self) -> None:
        """Look for idle conversations every `memory.idle_check_seconds`, until cancelled."""
        while True:
            await asyncio.sleep(self.settings.memory.idle_check_seconds)
            try:
                await self.write_idle()
            except Exception as error:  # the next check tries again
                log.warning("memory of idle conversations not written: %s", error)

    async def take_in(self, idle: Idle) -> int:
        """Write what the conversation's turns after `idle.taken_in` up to `idle.last`
        stated, unless another writer (or a forget) has moved on since; 1 when written."""
        conversation_id, before, last = idle.conversation_id, idle.taken_in, idle.last
        async with self.sessions() as session:
            if not await self._claim(session, conversation_id, before, last):
                return 0  # another replica, or a forget, was first
            conversation = await session.get(Conversation, conversation_id)
            assert conversation is not None
            said = list(
                await session.scalars(
                    select(Message)
                    .where(
                        Message.conversation_id == conversation_id,
                        Message.context_state != "dropped",  # a fold has taken those in
                        Message.turn > before,
                        Message.turn <= last,
                    )
                    .order_by(Message.seq)
                )
            )
            turns = await session.execute(
                select(Turn.number, Turn.memory_scope).where(
                    Turn.conversation_id == conversation_id, Turn.number > before
                )
            )
            people = PeopleMemory(self.settings.memory)
            scopes = {
                number: remembered
                for number, scope in turns
                if (remembered := people.scope_of(conversation.audience, scope))
            }
            key, profile = conversation.key, conversation.profile
            await session.commit()
        stated = [m for m in said if m.role == "user" and m.turn in scopes]
        if not stated:
            return 0
        collector = UsageCollector(profile, self.settings.observability)
        config: RunnableConfig = {
            **SUMMARY_RUN_CONFIG,
            "metadata": {PURPOSE_KEY: PURPOSE},
            "run_name": "memory_idle",
            "callbacks": [collector],
        }
        try:
            reply = await self.summary_model.ainvoke(
                summary_request(None, [cast(AnyMessage, to_langchain(m)) for m in said]), config
            )
            async with self.sessions() as session:
                facts = placed(stated_facts(reply.text), _sources(stated, scopes))
                await people.keep(session, key, facts)
                await session.commit()
        except Exception as error:  # given back: the next check tries again
            log.warning("memory of idle conversation %s not written: %s", key, error)
            async with self.sessions() as session:
                await self._claim(session, conversation_id, last, before)
                await session.commit()
            return 0
        async with self.sessions() as session:
            session.add_all(
                LLMCall(conversation_id=conversation_id, turn=last, **call.columns())
                for call in collector.records
            )
            await session.commit()
        return 1

    @staticmethod
    async def _claim(session: AsyncSession, conversation_id: int, was: int, now: int) -> bool:
        """Move the conversation's last turn taken in from `was` to `now`, if nobody has."""
        result = await session.execute(
            update(Conversation)
            .where(
                Conversation.id == conversation_id,
                func.coalesce(Conversation.idle_written_turn, 0) == was,
            )
            .values(idle_written_turn=now)
        )
        return bool(getattr(result, "rowcount", 0))
