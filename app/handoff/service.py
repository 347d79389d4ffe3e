"""HandoffService: opens handoffs (as the turn's router, and after 👎), keeps the bot quiet
while one is open, and lets staff claim, reply and resolve. One module for the handoff's
whole life (open, take turns, staff's doings), as the tests and the adapters see it.

It is the turn's router (app/chat/routing.py): `route` decides before a turn whether a
person takes it (a request for a person the decider is sure of), nobody (a person has the
conversation), or the bot (also when the client wants it back from a handoff nobody has
claimed); `take` stores such a turn without the model, and `after_answer` may still hand
over after the bot answered (the model called `request_human`, or the bot's last answers
all found nothing in the documentation). In a chat several people share (a Telegram
group) all of that is one member's (`TurnRequest.person`): their handoff, their counts,
their messages and replies to them held (app/handoff/store.py). Staff replies and notices
reach chats outside the service (Telegram) through the `Messenger` an adapter sets, in a
shared chat as replies to the member's last message; widget and API conversations read
them from the transcript."""

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.agent.memory.recall import ConversationArchive
from app.agent.memory.summarizer import build_summary_model
from app.agent.models import OFFLINE
from app.chat.outcome import BOT_ANSWERED
from app.chat.routing import BOT, FollowUp, Route, Taken
from app.chat.store import BegunTurn, HeldConversation, TurnStore
from app.chat.turn import AgentForProfile
from app.chat.types import TurnReply, TurnRequest
from app.db import queries
from app.db.models import Conversation, Handoff, LLMCall, Message, Turn
from app.decisions.decider import Decision, MessageDecider, decider_for
from app.handoff import metrics, store
from app.handoff.card import HandoffCard, build_card, summarize_for_card
from app.handoff.draft import (
    DRAFTING_OFF,
    FAILED,
    INTERRUPTED,
    NO_QUESTION,
    Draft,
    draft_input,
    make_draft,
    no_draft,
    open_question_of,
)
from app.handoff.hours import has_office_hours, next_shift_start
from app.handoff.notices import bot_back_notice, resumed_notice, takeover_notice
from app.handoff.store import HandoffConflict
from app.observability.calls import UsageCollector
from app.observability.redact import configured_secrets, redact_secrets
from app.observability.tracing import Tracer
from app.settings import Settings
from knowledge.tokens import count_tokens

log = logging.getLogger(__name__)


class Undelivered(Exception):
    """A staff reply or notice is stored but did not reach the client's chat."""


class Messenger(Protocol):
    """How the service reaches chats it does not serve itself (an adapter's)."""

    async def to_client(
        self, conversation_key: str, author: str | None, text: str, in_reply_to: int | None
    ) -> bool:
        """Send `text` (under `author`'s name) to the conversation's chat, as a reply to
        the message of turn `in_reply_to` (the person's, in a shared chat) when that is
        known: False when this messenger does not serve that conversation; Undelivered
        when sending failed."""
        ...

    async def card_opened(self, handoff_id: int, card: HandoffCard, draft: Draft) -> None:
        """Show staff a new handoff (the staff chat) with its drafted reply, and a way to
        claim it."""
        ...


@dataclass(frozen=True)
class Opened:
    """A handoff just opened, with what its draft starts from: the turn that opened it and
    the agent's input up to the open question (None: there is no question to draft for)."""

    handoff: Handoff
    conversation: Conversation
    turn: int
    trace_id: str | None  # the turn's Langfuse trace: the draft's calls go on it
    draft_input: dict[str, Any] | None


@dataclass(frozen=True)
class BotTurn:
    """The bot's route through a handed-over audience, as its first transaction read it:
    the state of the handoff when a person has the chat (the turn was addressed with /ask),
    and the outcomes of the bot's earlier answers since the last handoff, newest first."""

    during_handoff: str | None  # `open` or `claimed`
    earlier_outcomes: list[str] = field(default_factory=list)


def aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything stored is UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class HandoffService:
    def __init__(
        self,
        settings: Settings,
        turns: TurnStore,
        summary_model: BaseChatModel | None = None,
        *,
        tracer: Tracer | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        decider: MessageDecider | None = None,
    ) -> None:
        """`tracer`: tags the traces of turns that open a handoff or are answered during
        one (`handoff`); `now`: the clock the office hours are read with; `decider`: what
        a message is (by default the process's one for these settings)."""
        self._settings = settings
        self._turns = turns
        self._tracer = tracer or Tracer.disabled()
        self._model = summary_model or build_summary_model(settings.llm)
        self._now = now
        self._decider = decider
        self.messenger: Messenger | None = None  # set by the Telegram adapter, if any
        # The agents that draft replies for the cards: the chat's own (set by ChatService).
        self.drafter: AgentForProfile | None = None
        self._secrets = configured_secrets(settings)

    @property
    def decider(self) -> MessageDecider:
        if self._decider is None:
            knowledge = self._settings.knowledge
            self._decider = decider_for(
                knowledge.embedder, self._settings.decisions, knowledge.model_cache_dir
            )
        return self._decider

    def enabled(self, audience: str) -> bool:
        return audience in self._settings.handoff.audiences

    # -- the turn's router (app/chat/routing.py) ------------------------------------------

    async def prepare(self, request: TurnRequest) -> Decision | None:
        """What the message is, worked out before the turn holds the conversation, when
        `route` may need it: for an audience handed over, unless addressed with /ask (then
        `route` decides only if no person has the chat)."""
        if not self.enabled(request.audience) or request.ask:
            return None
        return await asyncio.to_thread(self.decider.decide, request.text)

    async def route(
        self,
        session: AsyncSession,
        conversation: Conversation,
        request: TurnRequest,
        prepared: Decision | None,
    ) -> Route:
        """A person's turn when the user asks for one (and the decider is sure enough:
        with a real model only of an unambiguous request), nobody's while a person has
        the conversation (unless addressed with /ask), the bot's again when the client
        wants it back from a handoff nobody has claimed; else the bot's, with what
        `after_answer` needs."""
        active = await store.holding(session, conversation.key, store.people_of(request))
        enabled = self.enabled(request.audience)
        if active is not None and request.ask:
            return Route("bot", BotTurn(during_handoff=active.status)) if enabled else BOT
        if active is None and not enabled:
            return BOT
        decision = prepared
        if decision is None:  # addressed with /ask, or the audience is no longer handed over
            decision = await asyncio.to_thread(self.decider.decide, request.text)
        if active is None:
            if self.decider.hands_over(decision, model_decides=self._model_decides):
                return Route("handed_off", decision)
            limit = self._settings.handoff.not_found_turns
            outcomes = await store.outcomes_since_resolved(
                session, conversation.id, request.person, limit
            )
            return Route("bot", BotTurn(during_handoff=None, earlier_outcomes=outcomes))
        # Only its own person gives a handoff back (not one replying to them in a group).
        own = active.person == store.person_of(request.person)
        if own and active.status == "open" and self.decider.gives_bot_back(decision):
            return Route("bot_back", (decision, active))
        return Route("quiet", active)

    async def take(
        self, held: HeldConversation, begun: BegunTurn, request: TurnRequest, route: Route
    ) -> Taken:
        """Open the handoff the user asked for, give the bot back, or stay quiet."""
        if route.kind == "handed_off":
            decision: Decision = route.detail
            opened = await self._open(
                held,
                begun.conversation,
                begun.turn,
                "asked",
                (request.person, request.author),
                self._how_sure(decision),
            )
            if opened is None:  # opened meanwhile by another turn
                return Taken("", "handed_off", handoff="open")
            notice = self._takeover_notice(decision.language, request.channel)
            announce = partial(self._announce, opened, request.audience)
            return Taken(notice, "handed_off", announce, handoff="open")
        if route.kind == "bot_back":
            decision, handoff = route.detail
            await self._give_back(held, handoff, request.author)
            return Taken(bot_back_notice(decision.language), "bot_back")
        active: Handoff = route.detail
        return Taken("", "quiet", handoff=active.status)

    @property
    def _model_decides(self) -> bool:
        """A real model is configured: it has `request_human` for what the decider leaves."""
        return self._settings.llm.model != OFFLINE

    def _how_sure(self, decision: Decision) -> str:
        """What the card says of the decision, for the staff member who reads it."""
        needed = self.decider.person_threshold(model_decides=self._model_decides)
        settings = self.decider.settings
        if decision.person >= needed:
            read = f"read as a request for a person with probability {decision.person:.2f}"
        elif decision.person_clause >= max(needed, settings.person_clause_confidence):
            needed = max(needed, settings.person_clause_confidence)
            read = (
                f"read as a {decision.intent}, one clause as a request for a person with "
                f"probability {decision.person_clause:.2f}"
            )
        else:
            needed = max(needed, settings.person_closing_confidence)
            read = (
                f"read as a {decision.intent}, its closing sentences as a request for a person "
                f"with probability {decision.person_closing:.2f}"
            )
        return f"{read} (needed {needed:.2f}; language {decision.language})"

    async def _give_back(
        self, held: HeldConversation, handoff: Handoff, author: str | None
    ) -> None:
        """Close a handoff nobody has claimed: the client wants the bot after all."""
        async with held.sessions() as session:
            closed = await store.resolve(session, handoff.id, f"client:{author or 'anonymous'}")
            await session.commit()
        if closed is not None and self._settings.observability.metrics_enabled:
            metrics.RESOLVED.inc()

    async def after_answer(
        self,
        held: HeldConversation,
        begun: BegunTurn,
        request: TurnRequest,
        reply: TurnReply,
        route: Route,
    ) -> tuple[TurnReply, FollowUp | None]:
        """Open a handoff when the model called `request_human` this turn or the bot's
        last answers all found nothing; the reply then ends with the takeover notice."""
        bot_turn = route.detail
        if not isinstance(bot_turn, BotTurn):  # an audience not handed over
            return reply, None
        conversation, turn = begun.conversation, begun.turn
        if bot_turn.during_handoff:  # answered on /ask
            self._tag(conversation, turn, request.author)
            return replace(reply, handoff=bot_turn.during_handoff), None
        limit = self._settings.handoff.not_found_turns
        this_turn = [reply.outcome] if reply.outcome in BOT_ANSWERED else []
        outcomes = (this_turn + bot_turn.earlier_outcomes)[:limit]
        if reply.outcome == "handed_off":  # the model called `request_human`
            reason, how_sure = "model", "the model called request_human"
        elif len(outcomes) == limit and all(o == "not_found" for o in outcomes):
            reason = "not_found"
            how_sure = f"{limit} answers in a row found nothing relevant in the documentation"
        else:
            return reply, None
        asker = (request.person, request.author)
        opened = await self._open(held, conversation, turn, reason, asker, how_sure)
        if opened is None:
            return reply, None
        notice = self._takeover_notice(self._language(request.text), request.channel)
        await self._add_message(held, conversation, "assistant", None, notice)
        self._tag(conversation, turn, request.author)
        text = f"{reply.text}\n\n{notice}".strip()
        announce = partial(self._announce, opened, request.audience)
        return replace(reply, text=text, handoff="open"), announce

    async def after_feedback(self, conversation: Conversation, rated: Turn) -> None:
        """Open a handoff once answers got `thumbs_down` 👎 (since the last handoff); the
        client is told in their chat. In a shared chat the answers to the `rated` turn's
        person count, and the handoff is theirs."""
        if not self.enabled(conversation.audience):
            return
        person = rated.person
        async with self._turns.reads() as session:
            if await store.holding(session, conversation.key, [store.person_of(person)]):
                return
            since = await store.last_resolved_at(session, conversation.id, person)
            downs = await store.thumbs_down(session, conversation.id, person, since)
            said = await session.scalar(
                select(Message.content)
                .where(Message.conversation_id == conversation.id, Message.role == "user")
                .order_by(Message.seq.desc())
                .limit(1)
            )
        if downs < self._settings.handoff.thumbs_down:
            return
        async with self._turns.hold(conversation.key) as held:
            async with held.sessions() as session:
                turn = await self._last_turn(session, conversation)
                if turn is None:  # rated a turn, so there is one
                    return
            how_sure = f"{downs} answers rated 👎"
            asker = (person, None)
            opened = await self._open(held, conversation, turn, "thumbs_down", asker, how_sure)
            if opened is None:
                return
            notice = self._takeover_notice(self._language(said or ""), conversation.channel)
            await self._add_message(held, conversation, "assistant", None, notice)
        await self._announce(opened, conversation.audience)
        await self._notify(opened.handoff, conversation, notice)

    # -- what staff do ---------------------------------------------------------------------

    async def queue(self, statuses: tuple[str, ...] = store.ACTIVE) -> list[Handoff]:
        async with self._turns.reads() as session:
            return await store.listed(session, statuses)

    async def get(self, handoff_id: int) -> Handoff | None:
        async with self._turns.reads() as session:
            return await session.get(Handoff, handoff_id)

    async def claim(self, handoff_id: int, staff: str) -> Handoff | None:
        """The handoff, now `staff`'s; None when there is none; HandoffConflict when
        another staff member has it (or it is resolved)."""
        async with self._turns.sessions() as session:
            handoff = await store.claim(session, handoff_id, staff)
            await session.commit()
        if handoff is not None and self._settings.observability.metrics_enabled:
            assert handoff.claimed_at is not None
            metrics.CLAIMED.inc()
            waited = aware(handoff.claimed_at) - aware(handoff.opened_at)
            metrics.CLAIM_SECONDS.observe(waited.total_seconds())
        return handoff

    async def reply(
        self, handoff_id: int, staff: str, text: str, *, from_draft: bool = False
    ) -> Message | None:
        """Store `staff`'s reply in the transcript (a `staff` message, which the model sees
        later) and deliver it to the client's chat. Needs the handoff claimed by `staff`.
        `from_draft`: the reply is the card's draft (maybe edited), which is then `sent`."""
        handoff = await self.get(handoff_id)
        if handoff is None:
            return None
        if handoff.status != "claimed" or handoff.claimed_by != staff:
            raise HandoffConflict(handoff, self._not_yours(handoff))
        conversation = await self._conversation(handoff)
        async with self._turns.hold(conversation.key) as held:
            message = await self._add_message(held, conversation, "staff", staff, text)
            if from_draft:
                async with held.sessions() as session:
                    await store.settle_draft(session, handoff_id, "sent")
                    await session.commit()
        await self._deliver(handoff, conversation, staff, text)
        return message

    async def dismiss_draft(self, handoff_id: int) -> Handoff | None:
        """Set the card's draft aside: nothing reaches the client's chat."""
        async with self._turns.sessions() as session:
            handoff = await store.settle_draft(session, handoff_id, "dismissed")
            await session.commit()
        return handoff

    async def resolve(self, handoff_id: int, staff: str) -> Handoff | None:
        """Close the handoff: the bot answers again, and the client is told so."""
        async with self._turns.sessions() as session:
            handoff = await store.resolve(session, handoff_id, staff)
            await session.commit()
        if handoff is None:
            return None
        if self._settings.observability.metrics_enabled:
            metrics.RESOLVED.inc()
        conversation = await self._conversation(handoff)
        async with self._turns.reads() as session:
            said = await session.scalar(
                select(Message.content)
                .where(Message.conversation_id == conversation.id, Message.role == "user")
                .order_by(Message.seq.desc())
                .limit(1)
            )
        notice = resumed_notice(self._language(said or ""))
        async with self._turns.hold(conversation.key) as held:
            await self._add_message(held, conversation, "assistant", None, notice)
        await self._notify(handoff, conversation, notice)
        return handoff

    # -- inside ----------------------------------------------------------------------------

    def _takeover_notice(self, language: str, channel: str) -> str:
        hours = self._settings.handoff
        if not has_office_hours(hours):
            return takeover_notice(language, None, channel, office_hours=False)
        return takeover_notice(language, next_shift_start(self._now(), hours), channel)

    def _language(self, said: str) -> str:
        return self.decider.language(said).language

    def _tag(self, conversation: Conversation, turn: Turn, author: str | None) -> None:
        if turn.trace_id is not None:
            self._tracer.tag(turn.trace_id, "handoff", conversation.key, author)

    @staticmethod
    def _not_yours(handoff: Handoff) -> str:
        if handoff.status == "open":
            return f"handoff {handoff.id} is not claimed: claim it before replying"
        if handoff.status == "resolved":
            return f"handoff {handoff.id} is resolved"
        return f"handoff {handoff.id} is claimed by {handoff.claimed_by}"

    async def _open(
        self,
        held: HeldConversation,
        conversation: Conversation,
        turn: Turn,
        reason: str,
        asker: tuple[str | None, str | None],
        how_sure: str,
    ) -> Opened | None:
        """Build the card (one summary-model call, stored as a `handoff` LLM call) and add
        the open handoff, the `asker`'s (their person, None for the whole conversation's,
        and their name); None when one holds them already. `how_sure`: how the decision
        was made, for the card. Its draft is made later (`_announce`), from the context
        read here."""
        person, requested_by = store.person_of(asker[0]), asker[1]
        async with held.sessions() as session:
            if await store.holding(session, conversation.key, [person]):
                return None
            summary = await queries.latest_summary(session, conversation)
            messages = await queries.context_messages(session, conversation)
            # Requests for a person and what was said while one had the chat are no topic.
            unanswered = await store.turns_with_outcome(session, conversation.id, store.NOT_BY_BOT)
        if reason == "asked":
            unanswered.add(turn.number)
        shown = [m for m in messages if m.turn not in unanswered]
        with self._tracer.attached(
            turn.trace_id, "handoff-card", conversation.key, requested_by
        ) as trace:
            collector = UsageCollector(
                conversation.profile, self._settings.observability, sink=trace
            )
            sections = await summarize_for_card(
                self._model,
                summary.text if summary else None,
                shown,
                {"callbacks": collector.callbacks},
            )
        base = self._settings.handoff.transcript_base_url.rstrip("/")
        card = build_card(
            conversation,
            (reason, how_sure),
            requested_by,
            sections,
            shown,
            f"{base}/v1/conversations/{conversation.key}",
        )
        handoff = Handoff(
            conversation_id=conversation.id,
            person=person,
            reason=reason,
            requested_by=requested_by,
            card=card.to_json(),
        )
        async with held.sessions() as session:
            if not await store.insert_open(session, handoff):
                return None
            session.add_all(
                LLMCall(conversation_id=conversation.id, turn=turn.number, **call.columns())
                for call in collector.records
            )
            await session.commit()
        question = open_question_of(card.open_question, shown)
        working = (
            draft_input(summary.text if summary else None, shown, question)
            if question is not None
            else None
        )
        return Opened(handoff, conversation, turn.number, turn.trace_id, working)

    async def _announce(self, opened: Opened, audience: str) -> None:
        """Count the new handoff, draft its reply and show both to staff (a failure there
        is logged: the handoff is in the widget's queue anyway). It runs after the client
        got the takeover notice, so the draft never delays the handoff itself."""
        handoff = opened.handoff
        if self._settings.observability.metrics_enabled:
            metrics.OPENED.labels(reason=handoff.reason, audience=audience).inc()
        draft = await self._draft(opened)
        if self.messenger is None:
            return
        try:
            card = HandoffCard.from_json(handoff.card)
            await self.messenger.card_opened(handoff.id, card, draft)
        except Exception as error:
            log.error("the card of handoff %s was not posted to staff: %s", handoff.id, error)

    async def _draft(self, opened: Opened) -> Draft:
        """The handoff's drafted reply, stored with it (its calls as `draft` LLM calls); a
        draft that fails or takes too long is "no draft", the reason logged; one a
        shutdown stops is "no draft" too, rather than left drafting."""
        handoff, conversation = opened.handoff, opened.conversation
        timeout = self._settings.handoff.draft_timeout_seconds
        with self._tracer.attached(
            opened.trace_id, "handoff-draft", conversation.key, handoff.requested_by
        ) as trace:
            collector = UsageCollector(
                conversation.profile, self._settings.observability, sink=trace
            )
            try:
                if opened.draft_input is None:
                    draft = no_draft(NO_QUESTION)
                elif self.drafter is None or not timeout:
                    draft = no_draft(DRAFTING_OFF)
                else:
                    archive = ConversationArchive(self._turns.reads, conversation.id)
                    limit = 10 * self._settings.llm.max_agent_steps
                    async with asyncio.timeout(timeout):
                        draft = await make_draft(
                            self.drafter,
                            conversation,
                            archive,
                            opened.draft_input,
                            collector,
                            limit,
                        )
            except asyncio.CancelledError:
                await self._keep_draft(opened, no_draft(INTERRUPTED), collector)
                raise
            except Exception as error:
                described = redact_secrets(f"{type(error).__name__}: {error}", self._secrets)
                log.error("the reply to handoff %s was not drafted: %s", handoff.id, described)
                draft = no_draft(FAILED)
        await self._keep_draft(opened, draft, collector)
        return draft

    async def _keep_draft(self, opened: Opened, draft: Draft, collector: UsageCollector) -> None:
        conversation = opened.conversation
        try:
            async with self._turns.sessions() as session:
                await store.set_draft(session, opened.handoff.id, draft.to_json())
                session.add_all(
                    LLMCall(conversation_id=conversation.id, turn=opened.turn, **call.columns())
                    for call in collector.records
                )
                await session.commit()
        except Exception as error:
            log.error("the draft of handoff %s was not stored: %s", opened.handoff.id, error)

    async def _deliver(
        self, handoff: Handoff, conversation: Conversation, author: str | None, text: str
    ) -> None:
        """To the handoff's chat; in a shared chat as a reply to its person's last message."""
        if self.messenger is None:
            return
        in_reply_to = None
        if handoff.person != store.WHOLE_CONVERSATION:
            async with self._turns.reads() as session:
                in_reply_to = await store.last_turn_of(session, conversation.id, handoff.person)
        await self.messenger.to_client(conversation.key, author, text, in_reply_to)

    async def _notify(self, handoff: Handoff, conversation: Conversation, text: str) -> None:
        """A notice of the bot's: stored already, so a chat that misses it is only logged."""
        try:
            await self._deliver(handoff, conversation, None, text)
        except Undelivered as error:
            log.error("a handoff notice did not reach %s: %s", conversation.key, error)

    async def _conversation(self, handoff: Handoff) -> Conversation:
        async with self._turns.reads() as session:
            conversation = await session.get(Conversation, handoff.conversation_id)
        assert conversation is not None  # the foreign key cascades
        return conversation

    @staticmethod
    async def _last_turn(session: AsyncSession, conversation: Conversation) -> Turn | None:
        last: Turn | None = await session.scalar(
            select(Turn)
            .where(Turn.conversation_id == conversation.id)
            .order_by(Turn.number.desc())
            .limit(1)
        )
        return last

    async def _add_message(
        self,
        held: HeldConversation,
        conversation: Conversation,
        role: str,
        author: str | None,
        text: str,
    ) -> Message:
        """A message outside the model's turns (a staff reply, a notice), filed under the
        conversation's last turn."""
        async with held.sessions() as session:
            last = await self._last_turn(session, conversation)
            row = {"role": role, "author": author, "content": text}
            message = await queries.add_message(
                session,
                conversation,
                last.number if last else 0,
                row | {"token_count": count_tokens(text)},
            )
            await session.commit()
        return message
