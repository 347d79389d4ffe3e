"""ChatService: one turn end to end, the same for every adapter (see DESIGN.md).

This module is what adapters call: a turn's events, and the conversation's other doings.
app/chat/turn.py runs one turn, app/chat/store.py keeps it in the database (and holds the
conversation's lock), app/chat/types.py names what goes in and comes out."""

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable

from sqlalchemy.exc import SQLAlchemyError

from app.chat.store import TurnStore
from app.chat.turn import AgentForProfile, TurnRunner
from app.chat.types import (
    InvalidTurn,
    TurnDone,
    TurnError,
    TurnEvent,
    TurnFailed,
    TurnReply,
    TurnRequest,
    UnknownProfile,
)
from app.db import queries
from app.db.models import Conversation, Feedback, Message, Turn
from app.handoff.service import HandoffService
from app.observability import metrics
from app.observability.simulator import PrefixCacheSimulator
from app.observability.tracing import Tracer, feedback_score_id
from app.settings import AUDIENCES, Settings

log = logging.getLogger(__name__)


def check_profile(settings: Settings, profile: str) -> None:
    """UnknownProfile unless the settings define a memory profile of that name."""
    if profile not in settings.profiles.definitions:
        raise UnknownProfile(
            f"unknown memory profile {profile!r}: use one of "
            + ", ".join(settings.profiles.definitions)
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
        handoffs: HandoffService | None = None,
    ) -> None:
        """`simulator` and `clock`: see TurnRunner. `handoffs`: hand conversations to a
        person (None: the bot answers everything)."""
        self._settings = settings
        self._store = store
        self._tracer = tracer or Tracer.disabled()
        self._runner = TurnRunner(
            settings, store, agent_for_profile, self._tracer, simulator, clock, handoffs
        )
        self._running: set[asyncio.Task[None]] = set()
        self.handoffs = handoffs
        if handoffs is not None:  # the cards' drafted replies come from the same agents
            handoffs.drafter = agent_for_profile

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
    ) -> AsyncGenerator[TurnEvent, None]:
        """The turn's events: `TurnStarted` once the user's message is stored, the
        answer's `TurnToken`s as the model writes them (with `tokens`), then one
        `TurnDone` or `TurnError`. A refusal raises InvalidTurn before the first event.
        The turn runs in a task of its own: a caller that stops listening does not stop
        it, and its answer is stored."""
        self.validate(request)
        events: asyncio.Queue[TurnEvent | InvalidTurn] = asyncio.Queue()
        task = asyncio.create_task(self._runner.run(request, events.put_nowait, tokens))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        while True:
            event = await events.get()
            if isinstance(event, InvalidTurn):
                raise event
            yield event
            if isinstance(event, TurnDone | TurnError):
                return

    async def close_orphaned_turns(self) -> int:
        """At start-up: turns left `running` by a process that is gone end `interrupted`."""
        channels = await self._store.close_orphaned_turns()
        for channel in channels:
            self._runner.count("interrupted", channel)
        if channels:
            log.warning("closed %d turns left running as interrupted", len(channels))
        return len(channels)

    async def sweep_orphans(self, every_seconds: float) -> None:
        """`close_orphaned_turns` every `every_seconds`, until cancelled: turns a crashed
        replica left in conversations that see no next turn."""
        while True:
            await asyncio.sleep(every_seconds)
            try:
                await self.close_orphaned_turns()
            except SQLAlchemyError as error:  # the database is down: the next sweep tries
                log.warning("could not close turns left running: %s", error)

    async def settled(self) -> None:
        """Wait for the turns still running, and what follows them (a handoff's draft and
        card), to end."""
        await asyncio.gather(*self._running, return_exceptions=True)

    async def aclose(self) -> None:
        """Stop the turns still running: each ends `interrupted`, its message kept."""
        for task in self._running:
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)

    async def find_turn(
        self, conversation_key: str, number: int
    ) -> tuple[Conversation, Turn] | None:
        async with self._store.reads() as session:
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
        feedback = Feedback(
            conversation_id=conversation.id,
            turn=turn.number,
            rating="up" if helpful else "down",
            comment=comment,
            author=author,
        )
        async with self._store.sessions() as session:
            session.add(feedback)
            await session.commit()
        if turn.trace_id:
            self._tracer.feedback(
                turn.trace_id, feedback_score_id(turn.trace_id, feedback.id), helpful, comment
            )
        if not helpful:
            await self._rated_down(conversation, turn)
        if self.handoffs is not None and not helpful:
            await self.handoffs.after_feedback(conversation, turn)

    async def _rated_down(self, conversation: Conversation, turn: Turn) -> None:
        """A 👎 as the `rated_down` outcome: counted, and tagged on the turn's trace (as
        the turn's asker's, whoever rated it)."""
        if self._settings.observability.metrics_enabled:
            metrics.count_outcome(
                outcome="rated_down", audience=conversation.audience, channel=conversation.channel
            )
        if turn.trace_id:
            async with self._store.reads() as session:
                asker = await queries.turn_author(session, conversation, turn.number)
            self._tracer.tag(turn.trace_id, "outcome:rated_down", conversation.key, asker)

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
        check_profile(self._settings, profile)
        return await self._store.set_profile(conversation_key, profile)

    async def usage(
        self, conversation_key: str
    ) -> tuple[Conversation, dict[str, queries.UsageTotals]] | None:
        """The conversation's LLM usage by purpose (agent, summary, expert)."""
        async with self._store.reads() as session:
            conversation = await queries.get_conversation(session, conversation_key)
            if conversation is None:
                return None
            return conversation, await queries.usage_by_purpose(session, conversation)

    async def history(self, conversation_key: str) -> tuple[Conversation, list[Message]] | None:
        """The whole stored transcript, including what the model no longer sees."""
        async with self._store.reads() as session:
            conversation = await queries.get_conversation(session, conversation_key)
            if conversation is None:
                return None
            return conversation, await queries.all_messages(session, conversation)

    async def conversations(self, key_prefix: str, limit: int) -> list[queries.ConversationSummary]:
        """The conversations whose key starts with `key_prefix`, the latest first."""
        async with self._store.reads() as session:
            return await queries.conversations_starting_with(session, key_prefix, limit)

    async def memory_blocks(self, conversation: Conversation) -> dict[int, str]:
        """The memory block each turn sent the model, by turn (app/memory/store.py)."""
        async with self._store.reads() as session:
            return await queries.memory_blocks(session, conversation)

    async def feedback(self, conversation: Conversation) -> dict[int, Feedback]:
        """The ratings of the conversation's answers by turn, the latest of each."""
        async with self._store.reads() as session:
            return await queries.latest_feedback(session, conversation)
