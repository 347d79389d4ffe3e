"""Plays a scenario through the real ChatService, one fresh conversation per profile.

Each profile run gets its own SQLite database, its own prefix-cache simulator and the
eval's own clock (turns back to back unless the scenario or the caller asks for gaps), so
runs are independent and repeatable. What the run observed (requests, calls, tool use)
is returned raw; `evals.metrics` turns it into numbers. The service hands conversations
to a person as the app does (`HandoffService`, for the audiences `handoff.audiences`
names): a scenario's closing `handoff` turn opens one, and its card's summary call is
kept apart from the answered turns. The users of a chat with a `tenant` are remembered
across the run's conversations as a backend's people are (`api|<tenant>|<user>`), unless
the profile forgets people (`evals.profiles.remembers_people`); a gap between turns past
the cache TTL writes the idle conversations' facts to memory as the service's periodic
check does (`app.memory.idle`), a call counted with the turn it follows.

One module: a run's set-up, its turns and what it records share one database and clock.
"""

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import Runnable
from sqlalchemy import select

from app.agent.memory.decisions import message_tokens
from app.agent.memory.prefix import (
    RequestRecorder,
    call_prefix_breaks,
    message_key,
    prefix_changes,
)
from app.agent.memory.summarizer import build_summary_model
from app.agent.offline import SEARCH_TOOL
from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnRequest
from app.db import migrate, queries
from app.db.engine import make_async_engine
from app.db.models import Handoff, LLMCall, Message
from app.handoff.service import HandoffService
from app.memory.idle import PURPOSE as IDLE_PURPOSE
from app.memory.idle import IdleWriter, idle_after
from app.memory.scope import api_scope
from app.observability.simulator import RULES, CacheRules, PrefixCacheSimulator, request_tokens
from app.observability.usage import CacheSource, UsageRecord
from app.runtime import agent_factory
from app.settings import DbSettings, Settings
from evals.peers import peer_memory_factories
from evals.profiles import context_profile, remembers_people, with_comparison_profiles
from evals.scenario import HANDOFF_KIND, Chat, Scenario, ScenarioTurn
from knowledge.tokens import count_tokens
from knowledge.types import Retriever

# The lower bound's cache: every prefix sent before is served, whatever its length or age.
IDEAL_CACHE = CacheRules(
    name="ideal",
    min_prefix_tokens=0,
    granularity=1,
    ttl_seconds=None,
    read_multiplier=0.0,
    write_multiplier=1.0,
)


MINUTES_PER_DAY = 24 * 60


class EvalClock:
    """The simulator's time in seconds; only the runner moves it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += minutes * 60


# The handoffs' office-hours clock: the eval's clock from a Monday morning, so a run's
# takeover notices do not depend on when it ran.
HANDOFF_EPOCH = datetime(2026, 1, 5, 9, tzinfo=UTC)
HANDOFF_PURPOSE = "handoff"  # the card's summary call (app/handoff/card.py)


@dataclass(frozen=True)
class CallRecord(UsageRecord):
    """One LLM call's usage record as the service stored it, with what an ideal cache
    would have served."""

    ideal_cached_tokens: int = 0  # had every prefix sent before been cached
    strict_cached_tokens: int = 0  # had every message (block) sent before been cached

    @classmethod
    def of(
        cls, call: LLMCall, *, ideal_cached_tokens: int = 0, strict_cached_tokens: int = 0
    ) -> "CallRecord":
        return cls(
            input_tokens=call.input_tokens,
            cached_tokens=call.cached_tokens,
            cache_write_tokens=call.cache_write_tokens,
            output_tokens=call.output_tokens,
            cache_source=cast(CacheSource, call.cache_source),
            purpose=call.purpose,
            model=call.model,
            latency_ms=call.latency_ms,
            ideal_cached_tokens=ideal_cached_tokens,
            strict_cached_tokens=strict_cached_tokens,
        )


@dataclass(frozen=True)
class Search:
    query: str
    sources: tuple[str, ...]  # of the passages shown
    passages: frozenset[tuple[str, str]]  # (source, text): what a re-search would repeat


@dataclass
class TurnOutcome:
    chat: str
    turn: ScenarioTurn
    step: int  # position in the whole scenario, from 1
    answer: str
    first_request: list[BaseMessage]  # what the model was sent at the start of the turn
    calls: list[CallRecord] = field(default_factory=list)
    tool_calls: list[str] = field(default_factory=list)  # tool names, in call order
    searches: list[Search] = field(default_factory=list)


@dataclass
class HandoffOutcome:
    """A `handoff` turn: the handoffs it opened and the card's LLM calls."""

    chat: str
    turn: ScenarioTurn
    answer: str  # the takeover notice
    reasons: list[str]  # of the handoffs opened in the chat
    calls: list[CallRecord] = field(default_factory=list)


@dataclass
class ProfileRun:
    profile: str
    repeat: int
    turns: list[TurnOutcome]
    prefix_changes: int  # turns whose first request does not extend the previous turn's
    call_prefix_breaks: int = 0  # agent requests that do not extend the one before them
    handoffs: list[HandoffOutcome] = field(default_factory=list)


def pieces(message: BaseMessage) -> list[tuple[str, int]]:
    """What of a message a strict cache could serve again on its own: each content block
    of a message made of blocks (the prompt and the summary), else the whole message."""
    if isinstance(message.content, list) and not isinstance(message, AIMessage | ToolMessage):
        return [
            (f"{message.type}:{json.dumps(block, sort_keys=True)}", count_tokens(str(block)))
            for block in message.content
        ]
    return [(json.dumps(message_key(message)), message_tokens(message))]


class EvalRecorder(RequestRecorder):
    """The agent's requests per turn (RequestRecorder) and, for every LLM call in order,
    the share of its tokens an earlier request of this run had already sent: as a prefix
    (`ideal_shares`) and anywhere (`strict_shares`)."""

    def __init__(self, ideal: PrefixCacheSimulator, sent: set[str]) -> None:
        super().__init__()
        self._ideal = ideal
        self._sent = sent
        self.ideal_shares: list[float] = []
        self.strict_shares: list[float] = []

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        invocation_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().on_chat_model_start(serialized, messages, **kwargs)
        tokens = request_tokens(messages[0], (invocation_params or {}).get("tools"))
        seen = self._ideal.observe(tokens, 0.0).cached_tokens
        self.ideal_shares.append(seen / len(tokens) if tokens else 0.0)
        parts = [piece for message in messages[0] for piece in pieces(message)]
        total = sum(size for _, size in parts)
        again = sum(size for key, size in parts if key in self._sent)
        self._sent.update(key for key, _ in parts)
        self.strict_shares.append(again / total if total else 0.0)


def with_profile(settings: Settings, profile: str) -> Settings:
    """Every audience served with `profile`'s memory profile, so a scenario's conversation
    gets it; people remembered across conversations unless the profile forgets them."""
    audiences = dict.fromkeys(settings.profiles.by_audience, context_profile(profile))
    memory = settings.memory
    if not remembers_people(profile):
        memory = memory.model_copy(update={"audiences": []})
    return settings.model_copy(
        update={
            "profiles": settings.profiles.model_copy(update={"by_audience": audiences}),
            "memory": memory,
        }
    )


def when_asked_only(settings: Settings) -> Settings:
    """Handoffs opened only when a user asks for a person: the app also hands a
    conversation over after answers that found nothing, which would end a scenario early
    (`forget-all` finds nothing twice in a row on the dev client session). No reply is
    drafted for the card: the evals measure the turns' calls, and a draft's are none of
    them."""
    never = sys.maxsize  # answers in a row that found nothing
    update = {"not_found_turns": never, "draft_timeout_seconds": 0}
    handoff = settings.handoff.model_copy(update=update)
    return settings.model_copy(update={"handoff": handoff})


@contextmanager
def scratch_database() -> Iterator[str]:
    with TemporaryDirectory(prefix="supportbot-eval-") as folder:
        url = f"sqlite:///{Path(folder) / 'eval.sqlite'}"
        migrate.upgrade(url)
        yield url


async def run_profile(
    settings: Settings,
    scenario: Scenario,
    profile: str,
    model: BaseChatModel,
    retriever: Retriever,
    *,
    provider_rules: str,
    gap_minutes: float = 0.0,
    repeat: int = 0,
    on_turn: Callable[[], None] | None = None,
) -> ProfileRun:
    """One fresh run of the scenario under `profile`; `on_turn` is called after each turn."""
    settings = with_profile(with_comparison_profiles(settings), profile)
    agents = agent_factory(settings, model, retriever, other_memory=peer_memory_factories())
    ideal = PrefixCacheSimulator(IDEAL_CACHE)  # one provider account: shared across chats
    sent: set[str] = set()
    recorders: list[EvalRecorder] = []

    def recorded(name: str) -> Runnable[Any, Any]:
        return agents(name).with_config(callbacks=[recorders[-1]])

    clock = EvalClock()
    outcomes: list[TurnOutcome] = []
    handoffs: list[HandoffOutcome] = []
    changed_prefixes = call_breaks = 0
    with scratch_database() as url:
        db = DbSettings(url=url)
        engine = make_async_engine(db)
        store = TurnStore.for_engine(engine, db)
        service = ChatService(
            settings,
            store,
            recorded,
            simulator=PrefixCacheSimulator(RULES[provider_rules]),
            clock=clock,
            handoffs=HandoffService(
                when_asked_only(settings),
                store,
                now=lambda: HANDOFF_EPOCH + timedelta(seconds=clock.now),
            ),
        )
        idle = IdleWriter(settings, store.sessions, build_summary_model(settings.llm))
        played: list[tuple[Chat, str, list[str]]] = []
        try:
            for chat in scenario.chats:
                recorders.append(EvalRecorder(ideal, sent))  # turn numbers restart in each chat
                key = f"eval:{profile}:{chat.id}"
                answers = []
                for number, turn in enumerate(chat.turns):
                    gap = gap_minutes if turn.gap_minutes is None else turn.gap_minutes
                    gap += chat.gap_days * MINUTES_PER_DAY if number == 0 else 0
                    clock.advance(gap)
                    if timedelta(minutes=gap) >= idle_after(settings):  # as the service does
                        await idle.write_idle(datetime.now(UTC) + timedelta(minutes=gap))
                    scope = api_scope(chat.tenant, turn.user) if chat.tenant else None
                    request = TurnRequest(
                        "eval", key, scenario.audience, turn.user, turn.text, memory_scope=scope
                    )
                    answers.append((await service.handle_turn(request)).text)
                    if on_turn:
                        on_turn()
                played.append((chat, key, answers))
            # after every chat: a write at idle comes after its conversation's last turn
            for (chat, key, answers), recorder in zip(played, recorders, strict=True):
                found, handoff = await _collected(
                    store, chat, key, answers, recorder, len(outcomes)
                )
                outcomes += found
                handoffs += [handoff] if handoff else []
                changed_prefixes += len(prefix_changes(recorder.turns))
                call_breaks += call_prefix_breaks(recorder.turns)
        finally:
            await engine.dispose()
    return ProfileRun(profile, repeat, outcomes, changed_prefixes, call_breaks, handoffs)


async def _collected(
    store: TurnStore,
    chat: Chat,
    key: str,
    answers: list[str],
    recorder: EvalRecorder,
    steps_before: int,
) -> tuple[list[TurnOutcome], HandoffOutcome | None]:
    """What one chat's conversation left in the database: its answered turns and the
    handoff its closing turn opened, if any."""
    async with store.sessions() as session:
        conversation = await queries.get_conversation(session, key)
        assert conversation is not None
        messages = await queries.all_messages(session, conversation)
        calls = await queries.llm_calls(session, conversation)
        reasons = await session.scalars(
            select(Handoff.reason).where(Handoff.conversation_id == conversation.id)
        )
        opened = list(reasons)
    answered = len(chat.answered_turns)
    outcomes = _outcomes(chat, steps_before, answers[:answered], recorder, messages, calls)
    if answered == len(chat.turns):
        return outcomes, None
    card_calls = [CallRecord.of(c) for c in calls if c.purpose == HANDOFF_PURPOSE]
    return outcomes, HandoffOutcome(chat.id, chat.turns[-1], answers[-1], opened, card_calls)


def _outcomes(
    chat: Chat,
    steps_before: int,
    answers: list[str],
    recorder: EvalRecorder,
    messages: list[Message],
    calls: list[LLMCall],
) -> list[TurnOutcome]:
    """The chat's answered turns with the requests, calls and tool use the run left
    behind (a closing `handoff` turn's are the handoff's)."""
    handed = [c.turn for c in calls if c.purpose == HANDOFF_PURPOSE and c.turn <= len(answers)]
    if handed:
        raise RuntimeError(
            f"chat {chat.id} was handed to a person at turn {handed[0]}, before its "
            f"`{HANDOFF_KIND}` turn: the turns after it were not answered"
        )
    outcomes = [
        TurnOutcome(chat.id, turn, steps_before + number, answer, requests.requests[0])
        for number, (turn, answer, requests) in enumerate(
            zip(chat.answered_turns, answers, recorder.turns, strict=True), start=1
        )
    ]
    shares = zip(recorder.ideal_shares, recorder.strict_shares, strict=True)
    recorded = [c for c in calls if c.purpose not in (HANDOFF_PURPOSE, IDLE_PURPOSE)]
    for call in (c for c in calls if c.purpose == IDLE_PURPOSE):  # after the turn, not in it
        outcomes[call.turn - 1].calls.append(CallRecord.of(call))
    for call, (ideal_share, strict_share) in zip(recorded, shares, strict=True):
        outcomes[call.turn - 1].calls.append(
            CallRecord.of(
                call,
                ideal_cached_tokens=round(call.input_tokens * ideal_share),
                strict_cached_tokens=round(call.input_tokens * max(strict_share, ideal_share)),
            )
        )
    for message in messages:
        if message.turn > len(outcomes):
            continue  # the handoff turn's request and notice
        outcome = outcomes[message.turn - 1]
        if message.role == "assistant":
            outcome.tool_calls += [c["name"] for c in message.tool_calls or []]
        elif message.role == "tool" and message.tool_name == SEARCH_TOOL:
            passages = message.artifact or []
            content = message.content or ""
            query = next(
                (
                    str(c["args"].get("query", ""))
                    for m in messages
                    for c in (m.tool_calls or [])
                    if c.get("id") == message.tool_call_id
                ),
                "",
            )
            outcome.searches.append(
                Search(
                    query=query,
                    # the pages the model was shown: a passage past the result's token
                    # budget is in the artifact only
                    sources=tuple(
                        p["source"] for p in passages if f"(source: {p['source']})" in content
                    ),
                    passages=frozenset((p["source"], p["text"]) for p in passages),
                )
            )
    return outcomes
