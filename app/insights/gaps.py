"""The knowledge-gap report: the questions behind the turns the bot did not answer from
the documentation (`not_found`, `expert`, `handed_off`) or answered badly (`rated_down`: a
👎; `unresolved`: the follow-up said the answer failed or asked the same again,
app/insights/followups.py), over a period, grouped by topic (app/insights/topics.py), each
group with its count, its trend against the previous period of the same length, example
questions linked to their transcripts, the pages retrieval came closest to (none: nothing
to extend, a page to write) and what those turns cost."""

import asyncio
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agent.tools import KNOWLEDGE_TOOL
from app.db.models import Conversation, Feedback, Handoff, LLMCall, Message, Turn
from app.insights.followups import ANSWERED, FollowUpReader, load_follow_ups, unresolved_turns
from app.insights.topics import Matrix, topics
from app.observability.model_names import OFFLINE_MODELS
from app.settings import Settings
from knowledge.embeddings import Embedder, get_embedder
from knowledge.graph_cache import GraphCache, default_cache_folder

GAP_OUTCOMES = ("not_found", "expert", "handed_off")
EXAMPLES = 5  # questions shown per group
PAGES = 3  # closest pages shown per group


def transcript_link(key: str) -> str:
    return f"/v1/conversations/{quote(key, safe=':@+.-_')}"


@dataclass(frozen=True)
class Page:
    title: str
    source: str
    similarity: float  # the closest any of the group's searches came


@dataclass(frozen=True)
class GapTurn:
    """One unanswered (or 👎) question, as loaded."""

    conversation_key: str
    turn: int
    question: str
    outcome: str  # not_found | expert | handed_off | rated_down | unresolved
    started_at: datetime
    pages: tuple[Page, ...]
    cost_usd: float  # simulated for the offline models' calls (app/observability/pricing.py)
    comment: str | None = None  # the 👎's comment
    handoff_reason: str | None = None  # asked | model | not_found | thumbs_down
    cost_simulated: bool = False  # all of cost_usd: no provider billed it
    failed_by: str | None = None  # an unresolved answer's: said_wrong | asked_again

    @property
    def transcript(self) -> str:
        return transcript_link(self.conversation_key)


@dataclass(frozen=True)
class GapGroup:
    name: str  # its most central question
    words: list[str]
    count: int
    previous: int  # questions of the previous period on this topic
    outcomes: dict[str, int]
    examples: list[GapTurn]
    pages: list[Page]
    cost_usd: float
    cost_simulated: bool  # all of it: the offline models' calls, priced, nothing billed

    @property
    def trend(self) -> int:
        return self.count - self.previous


@dataclass(frozen=True)
class GapReport:
    since: datetime
    until: datetime
    questions: int  # in all groups
    groups: list[GapGroup] = field(default_factory=list)
    total_groups: int = 0  # before paging
    offset: int = 0


# Handoffs that were about the documentation, not a request for a person.
_DOCUMENTATION_HANDOFFS = ("not_found", "thumbs_down")


def is_documentation_question(outcome: str, handoff_reason: str | None) -> bool:
    """A turn whose question the documentation did not answer: a request for a person
    (a handoff the client or the model asked for) is a handoff, not a knowledge gap."""
    return outcome != "handed_off" or handoff_reason in _DOCUMENTATION_HANDOFFS


def within_tenant(prefix: str | None) -> Any:
    """The conversations a caller may see: all (staff, `None`) or those whose key starts
    with `prefix` (an API key's), compared literally."""
    if prefix is None:
        return True
    return func.substr(Conversation.key, 1, len(prefix)) == prefix


async def load_gap_turns(
    session: AsyncSession,
    since: datetime,
    until: datetime,
    prefix: str | None,
    unresolved: Mapping[tuple[int, int], str] | None = None,
) -> list[GapTurn]:
    """The period's turns that ended in a gap outcome, got a 👎 or are answers their
    follow-up says failed (`unresolved`: conversation id and turn, with how it said so),
    oldest first; a request for a person is left out (`is_documentation_question`)."""
    unresolved = unresolved or {}
    rated_down = (
        select(Feedback.conversation_id, Feedback.turn)
        .where(Feedback.rating == "down")
        .distinct()
        .subquery()
    )
    rows = (
        await session.execute(
            select(Conversation.id, Conversation.key, Turn.number, Turn.outcome, Turn.started_at)
            .join(Turn, Turn.conversation_id == Conversation.id)
            .outerjoin(
                rated_down,
                (rated_down.c.conversation_id == Conversation.id)
                & (rated_down.c.turn == Turn.number),
            )
            .add_columns(rated_down.c.turn.is_not(None).label("rated_down"))
            .where(
                Turn.started_at >= since,
                Turn.started_at < until,
                within_tenant(prefix),
                Turn.outcome.in_((*GAP_OUTCOMES, *(ANSWERED if unresolved else ())))
                | rated_down.c.turn.is_not(None),
            )
            .order_by(Turn.started_at, Turn.id)
        )
    ).all()
    rows = [
        row
        for row in rows
        if row.rated_down or row.outcome in GAP_OUTCOMES or (row.id, row.number) in unresolved
    ]
    if not rows:
        return []
    ids = {row.id for row in rows}
    wanted = {(row.id, row.number) for row in rows}
    messages = await session.execute(
        select(
            Message.conversation_id, Message.turn, Message.role, Message.content, Message.artifact
        )
        .where(
            Message.conversation_id.in_(ids),
            (Message.role == "user") | (Message.tool_name == KNOWLEDGE_TOOL),
        )
        .order_by(Message.seq)
    )
    questions: dict[tuple[int, int], str] = {}
    pages: dict[tuple[int, int], dict[str, Page]] = {}
    for message in messages:
        where = (message.conversation_id, message.turn)
        if where not in wanted:
            continue
        if message.role == "user":
            questions.setdefault(where, message.content)
        for passage in message.artifact or []:
            page = Page(passage["title"], passage["source"], float(passage.get("similarity") or 0))
            known = pages.setdefault(where, {}).get(page.source)
            if known is None or known.similarity < page.similarity:
                pages[where][page.source] = page
    offline = func.lower(LLMCall.model).in_(OFFLINE_MODELS)
    costs = {
        (row.conversation_id, row.turn): (float(row.cost), not row.billed_calls)
        for row in await session.execute(
            select(
                LLMCall.conversation_id,
                LLMCall.turn,
                func.sum(LLMCall.cost_usd).label("cost"),
                func.sum(case((offline, 0), else_=1)).label("billed_calls"),
            )
            .where(LLMCall.conversation_id.in_(ids))
            .group_by(LLMCall.conversation_id, LLMCall.turn)
        )
    }
    comments = {
        (row.conversation_id, row.turn): row.comment
        for row in await session.execute(
            select(Feedback.conversation_id, Feedback.turn, Feedback.comment)
            .where(
                Feedback.conversation_id.in_(ids),
                Feedback.rating == "down",
                Feedback.comment.is_not(None),
            )
            .order_by(Feedback.created_at)  # the latest wins
        )
    }
    handoffs = list(
        await session.execute(
            select(Handoff.conversation_id, Handoff.reason, Handoff.opened_at)
            .where(Handoff.conversation_id.in_(ids))
            .order_by(Handoff.opened_at)
        )
    )

    def handoff_reason(conversation_id: int, started_at: datetime) -> str | None:
        """The reason of the first handoff the turn opened (opened after it started)."""
        return next(
            (
                h.reason
                for h in handoffs
                if h.conversation_id == conversation_id and h.opened_at >= started_at
            ),
            None,
        )

    turns = [
        GapTurn(
            conversation_key=row.key,
            turn=row.number,
            question=questions[(row.id, row.number)],
            outcome=(
                "rated_down"
                if row.rated_down
                else "unresolved"
                if (row.id, row.number) in unresolved
                else row.outcome
            ),
            started_at=row.started_at,
            pages=tuple(pages.get((row.id, row.number), {}).values()),
            cost_usd=costs.get((row.id, row.number), (0.0, False))[0],
            cost_simulated=costs.get((row.id, row.number), (0.0, False))[1],
            comment=comments.get((row.id, row.number)),
            handoff_reason=(
                handoff_reason(row.id, row.started_at) if row.outcome == "handed_off" else None
            ),
            failed_by=unresolved.get((row.id, row.number)),
        )
        for row in rows
        if (row.id, row.number) in questions
    ]
    return [turn for turn in turns if is_documentation_question(turn.outcome, turn.handoff_reason)]


def closest_pages(turns: Sequence[GapTurn]) -> list[Page]:
    best: dict[str, Page] = {}
    for turn in turns:
        for page in turn.pages:
            if page.source not in best or best[page.source].similarity < page.similarity:
                best[page.source] = page
    return sorted(best.values(), key=lambda page: -page.similarity)[:PAGES]


def group_report(
    turns: Sequence[GapTurn], previous: Sequence[GapTurn], embed: Callable[[list[str]], Matrix]
) -> list[GapGroup]:
    """The groups of `turns` by topic, the largest first (the costlier of equal ones). The
    topics are found over both periods, so a group's `previous` counts the questions of the
    period before (`previous`) on its topic; a topic asked only then is left out.
    CPU-bound (embedding, clustering): run it off the event loop."""
    if not turns:
        return []
    both = [*turns, *previous]
    questions = [turn.question for turn in both]
    groups = []
    for topic in topics(questions, embed(questions)):
        members = [turns[i] for i in topic.members if i < len(turns)]
        if not members:
            continue
        groups.append(
            GapGroup(
                name=members[0].question,
                words=topic.words,
                count=len(members),
                previous=len(topic.members) - len(members),
                outcomes=dict(Counter(turn.outcome for turn in members)),
                examples=members[:EXAMPLES],
                pages=closest_pages(members),
                cost_usd=sum(turn.cost_usd for turn in members),
                cost_simulated=any(turn.cost_usd for turn in members)
                and all(turn.cost_simulated for turn in members if turn.cost_usd),
            )
        )
    return sorted(groups, key=lambda group: (-group.count, -group.cost_usd))


class EmbeddingCache:
    """Question embeddings kept by text: the same questions recur in every period asked."""

    def __init__(self, embedder: Callable[[], Embedder], size: int = 20_000) -> None:
        self._embedder = embedder
        self._size = size
        self._vectors: dict[str, Matrix] = {}

    def __call__(self, texts: list[str]) -> Matrix:
        missing = [text for text in dict.fromkeys(texts) if text not in self._vectors]
        if missing:
            embedder = self._embedder()
            if len(self._vectors) + len(missing) > self._size:
                self._vectors.clear()
            for text in missing:
                self._vectors[text] = np.asarray(embedder.embed_query(text), dtype=np.float32)
        return np.array([self._vectors[text] for text in texts], dtype=np.float32)


class GapReporter:
    """Computes reports off the event loop and keeps each (period, tenant) one: the period's
    end is rounded up to `granularity`, so the same `--since` within it is one report (a
    turn ended since it was computed shows from the next one)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        embedder: Callable[[], Embedder],
        granularity: timedelta = timedelta(minutes=1),
        kept: int = 32,
        cache_folder: Path | None = None,
    ) -> None:
        self._sessions = sessions
        self._embedder = embedder
        self._embed = EmbeddingCache(embedder)
        self._cache_folder = cache_folder
        self._reader: FollowUpReader | None = None
        self._granularity = granularity
        self._kept = kept
        self._reports: dict[tuple[datetime, datetime, str | None], list[GapGroup]] = {}
        self._failed: dict[tuple[datetime, datetime, str | None], dict[tuple[int, int], str]] = {}
        self._lock = asyncio.Lock()  # one computation at a time: they share the embedder

    def period(self, length: timedelta, now: datetime) -> tuple[datetime, datetime]:
        step = self._granularity.total_seconds()
        until = datetime.fromtimestamp(-(-now.timestamp() // step) * step, now.tzinfo)
        return until - length, until

    def _follow_up_reader(self) -> FollowUpReader:
        if self._reader is None:
            cache = GraphCache(self._cache_folder) if self._cache_folder else None
            self._reader = FollowUpReader(self._embedder(), cache)
        return self._reader

    async def unresolved(
        self, since: datetime, until: datetime, prefix: str | None
    ) -> dict[tuple[int, int], str]:
        """The answers of [since, until) whose follow-up says they failed
        (app/insights/followups.py), for a tenant; kept per period as reports are."""
        async with self._lock:
            return await self._unresolved(since, until, prefix)

    async def _unresolved(
        self, since: datetime, until: datetime, prefix: str | None
    ) -> dict[tuple[int, int], str]:
        key = (since, until, prefix)
        if key not in self._failed:
            async with self._sessions() as session:
                follow_ups = await load_follow_ups(session, since, until, within_tenant(prefix))
            reader = self._follow_up_reader()
            found = await asyncio.to_thread(unresolved_turns, reader, follow_ups)
            self._keep(self._failed, key, found)
        return self._failed[key]

    def _keep(self, kept: dict[Any, Any], key: Any, value: Any) -> None:
        """`value` under `key`, the oldest entry dropped past `kept` of them."""
        if len(kept) >= self._kept:
            kept.pop(next(iter(kept)))
        kept[key] = value

    async def report(
        self,
        since: datetime,
        until: datetime,
        prefix: str | None,
        offset: int = 0,
        limit: int = 20,
    ) -> GapReport:
        """One page of the report of [since, until) for a tenant (`prefix`; None: all)."""
        key = (since, until, prefix)
        async with self._lock:
            groups = self._reports.get(key)
            if groups is None:
                before = since - (until - since)
                failed = await self._unresolved(since, until, prefix)
                failed_before = await self._unresolved(before, since, prefix)
                async with self._sessions() as session:
                    turns = await load_gap_turns(session, since, until, prefix, failed)
                    previous = await load_gap_turns(session, before, since, prefix, failed_before)
                groups = await asyncio.to_thread(group_report, turns, previous, self._embed)
                self._keep(self._reports, key, groups)
        return GapReport(
            since=since,
            until=until,
            questions=sum(group.count for group in groups),
            groups=groups[offset : offset + limit],
            total_groups=len(groups),
            offset=offset,
        )


_MINUTES = {"m": 1, "h": 60, "d": 24 * 60, "w": 7 * 24 * 60}
_PERIOD = re.compile(r"(?P<number>[0-9]+)(?P<unit>[mhdwMHDW])")
# The longest period: the report compares it with the one before, so twice it back from
# now must still be a date.
MAX_PERIOD = timedelta(days=3650)
_DIGITS = 9  # more than any period within MAX_PERIOD has: read no further


class BadPeriod(ValueError):
    """A period that is not a positive number of minutes, hours, days or weeks, or one
    longer than `MAX_PERIOD`."""


def parse_period(text: str) -> timedelta:
    """`30m`, `24h`, `7d`, `2w` as a timedelta, at most `MAX_PERIOD`."""
    match = _PERIOD.fullmatch(text.strip())
    digits = match["number"].lstrip("0") if match else ""
    if not match or not digits:
        raise BadPeriod(f"period {text!r}: use a positive whole number and m, h, d or w (e.g. 7d)")
    minutes = int(digits) * _MINUTES[match["unit"].lower()] if len(digits) <= _DIGITS else None
    if minutes is None or minutes > MAX_PERIOD // timedelta(minutes=1):
        raise BadPeriod(f"period {text!r}: at most {MAX_PERIOD.days} days")
    return timedelta(minutes=minutes)


def reporter_for(settings: Settings, sessions: async_sessionmaker[AsyncSession]) -> GapReporter:
    """A reporter embedding with the knowledge base's embedder (loaded on its first report)."""
    knowledge = settings.knowledge
    return GapReporter(
        sessions,
        lambda: get_embedder(knowledge.embedder, knowledge.model_cache_dir),
        cache_folder=knowledge.model_cache_dir or default_cache_folder(),
    )
