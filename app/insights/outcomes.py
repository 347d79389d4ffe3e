"""Turns' outcomes over time: the outcome mix per day, the resolution rate (conversations
the bot answered without a person, a 👎 or a follow-up that says the answer failed —
app/insights/followups.py), handoffs by reason, the cost per resolved
conversation and the prompt-cache hit rate per memory profile."""

from collections import Counter, defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import date, datetime

from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Conversation, Feedback, Handoff, LLMCall, Turn
from app.insights.gaps import within_tenant
from app.observability.model_names import OFFLINE_MODELS

ANSWERED_BY_BOT = ("answered", "expert")


@dataclass
class Day:
    day: date
    outcomes: Counter[str] = field(default_factory=Counter)
    conversations: int = 0
    resolved: int = 0

    @property
    def resolution_rate(self) -> float | None:
        return self.resolved / self.conversations if self.conversations else None


@dataclass
class OutcomeReport:
    since: datetime
    until: datetime
    days: list[Day]
    outcomes: Counter[str]
    conversations: int
    resolved: int
    handoffs_by_reason: Counter[str]
    cost_usd: float
    cache_hit_rate_by_profile: dict[str, float]
    # The part of cost_usd no provider billed: the offline models' calls, priced as the
    # models they stand in for (app/observability/pricing.py).
    simulated_cost_usd: float = 0.0

    @property
    def resolution_rate(self) -> float | None:
        return self.resolved / self.conversations if self.conversations else None

    @property
    def cost_simulated(self) -> bool:
        """All that was spent is simulated: nothing in the period was billed."""
        return self.simulated_cost_usd > 0 and self.simulated_cost_usd == self.cost_usd

    @property
    def cost_per_resolved(self) -> float | None:
        """All that was spent on LLM calls in the period, per conversation resolved."""
        return self.cost_usd / self.resolved if self.resolved else None


def resolved(outcomes: list[str], handed_off: bool) -> bool:
    """Answered by the bot at least once, with no handoff, no 👎, no answer its follow-up
    says failed and no failed turn."""
    return (
        not handed_off
        and any(o in ANSWERED_BY_BOT for o in outcomes)
        and not {"handed_off", "rated_down", "unresolved", "failed"} & set(outcomes)
    )


async def outcome_report(
    session: AsyncSession,
    since: datetime,
    until: datetime,
    prefix: str | None,
    unresolved: Collection[tuple[int, int]] = (),
) -> OutcomeReport:
    """The figures of the turns started in [since, until) in the caller's conversations
    (`prefix`; None: all). A turn with a 👎 counts as `rated_down`; an answer whose
    follow-up says it failed (`unresolved`: conversation id and turn) as `unresolved`; a
    failed or interrupted one as `failed`."""
    in_period = (Turn.started_at >= since) & (Turn.started_at < until)
    rated_down = {
        (row.conversation_id, row.turn)
        for row in await session.execute(
            # A rating comes after its turn: older ones rate older turns.
            select(Feedback.conversation_id, Feedback.turn).where(
                Feedback.rating == "down", Feedback.created_at >= since
            )
        )
    }
    turns = await session.execute(
        select(Turn.conversation_id, Turn.number, Turn.status, Turn.outcome, Turn.started_at)
        .join(Conversation, Conversation.id == Turn.conversation_id)
        .where(in_period, within_tenant(prefix), Turn.status != "running")
    )
    by_day: dict[date, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for row in turns:
        if (row.conversation_id, row.number) in rated_down:
            outcome = "rated_down"
        elif (row.conversation_id, row.number) in unresolved:
            outcome = "unresolved"
        elif row.status in ("failed", "interrupted"):
            outcome = "failed"
        else:
            outcome = row.outcome or "failed"
        by_day[row.started_at.date()][row.conversation_id].append(outcome)
    handoffs = list(
        await session.execute(
            select(Handoff.conversation_id, Handoff.reason, Handoff.opened_at)
            .join(Conversation, Conversation.id == Handoff.conversation_id)
            .where(Handoff.opened_at >= since, Handoff.opened_at < until, within_tenant(prefix))
        )
    )
    handed = {(row.opened_at.date(), row.conversation_id) for row in handoffs}
    days = []
    whole: dict[int, list[str]] = defaultdict(list)
    for day in sorted(by_day):
        figures = Day(day)
        for conversation, outcomes in by_day[day].items():
            figures.outcomes.update(outcomes)
            figures.conversations += 1
            figures.resolved += resolved(outcomes, (day, conversation) in handed)
            whole[conversation] += outcomes
        days.append(figures)
    handed_ever = {conversation for _, conversation in handed}
    offline = func.lower(LLMCall.model).in_(OFFLINE_MODELS)
    calls = await session.execute(
        select(
            Conversation.profile,
            func.sum(case((offline, 0.0), else_=LLMCall.cost_usd)),
            func.sum(case((offline, LLMCall.cost_usd), else_=0.0)),
            func.sum(LLMCall.cached_tokens),
            func.sum(LLMCall.input_tokens),
        )
        .join(Conversation, Conversation.id == LLMCall.conversation_id)
        .where(LLMCall.created_at >= since, LLMCall.created_at < until, within_tenant(prefix))
        .group_by(Conversation.profile)
    )
    billed = simulated = 0.0
    hit_rates = {}
    for profile, spent, priced, cached, sent in calls:
        billed += float(spent or 0)
        simulated += float(priced or 0)
        if sent:
            hit_rates[profile] = float(cached or 0) / float(sent)
    return OutcomeReport(
        since=since,
        until=until,
        days=days,
        outcomes=sum((day.outcomes for day in days), Counter()),
        conversations=len(whole),
        resolved=sum(resolved(o, c in handed_ever) for c, o in whole.items()),
        handoffs_by_reason=Counter(row.reason for row in handoffs),
        cost_usd=billed + simulated,
        cache_hit_rate_by_profile=hit_rates,
        simulated_cost_usd=simulated,
    )
