"""What the bot did not answer and what outcomes cost, over HTTP (app/insights). Staff see
every conversation; an API key only those of its own key prefix."""

from datetime import UTC, date, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from app.api.auth import CallerDep
from app.api.deps import RuntimeDep
from app.api.errors import documented
from app.api.schemas import UtcDatetime
from app.insights.gaps import MAX_PERIOD, BadPeriod, GapReporter, parse_period, reporter_for
from app.insights.outcomes import outcome_report

router = APIRouter(prefix="/v1/insights", tags=["insights"])

Since = Annotated[
    str,
    Query(
        max_length=32,
        description=f"the period up to now: 30m, 24h, 7d, 2w; at most {MAX_PERIOD.days} days",
        examples=["7d"],
    ),
]


def tenant_prefix(caller: CallerDep) -> str | None:
    """The key prefix the caller's conversations start with; None for staff (all)."""
    if caller.is_staff:
        return None
    if caller.kind == "backend":
        return caller.key_prefix
    # anonymous, on an open API: identified, and not allowed (no tenant of its own)
    raise HTTPException(status.HTTP_403_FORBIDDEN, "the insights are for staff and API keys")


TenantPrefix = Annotated[str | None, Depends(tenant_prefix)]


def gap_reporter(request: Request, runtime: RuntimeDep) -> GapReporter:
    """One per app: its cache of reports is shared by every request."""
    state = request.app.state
    if not hasattr(state, "gap_reporter"):
        state.gap_reporter = reporter_for(runtime.settings, runtime.sessions)
    reporter: GapReporter = state.gap_reporter
    return reporter


ReporterDep = Annotated[GapReporter, Depends(gap_reporter)]


def period(since: Since, reporter: ReporterDep) -> tuple[datetime, datetime]:
    """The period up to now, its end rounded as the reporter caches reports; 422 when
    `since` is not a period."""
    try:
        length = parse_period(since)
    except BadPeriod as bad:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(bad)) from None
    return reporter.period(length, datetime.now(UTC))


Period = Annotated[tuple[datetime, datetime], Depends(period)]


class _FromReport(BaseModel):
    """Read from the report's dataclasses by attribute (pydantic's `from_attributes`)."""

    model_config = ConfigDict(from_attributes=True)


class PageOut(_FromReport):
    title: str
    source: str
    similarity: float


class QuestionOut(_FromReport):
    question: str
    outcome: str
    conversation_key: str
    turn: int
    transcript: str  # GET it for the whole conversation
    asked_at: UtcDatetime = Field(validation_alias=AliasChoices("asked_at", "started_at"))
    comment: str | None  # the 👎's comment
    handoff_reason: str | None  # for a turn handed to a person: asked, model, not_found
    failed_by: str | None = Field(
        description="an unresolved answer's follow-up: said_wrong (it said the answer failed) "
        "or asked_again (the same question in other words)"
    )


class GapGroupOut(_FromReport):
    name: str
    words: list[str]
    count: int
    previous: int
    trend: int
    outcomes: dict[str, int]
    examples: list[QuestionOut]
    pages: list[PageOut]  # empty: the documentation has nothing near (a page to write)
    cost_usd: float
    cost_simulated: bool = Field(
        description="all of cost_usd is simulated: the offline model's calls, priced as the "
        "model it stands in for; nothing was billed"
    )


class GapReportOut(_FromReport):
    since: UtcDatetime
    until: UtcDatetime
    questions: int
    total_groups: int
    offset: int
    groups: list[GapGroupOut]


class DayOut(BaseModel):
    day: date
    outcomes: dict[str, int]
    conversations: int
    resolved: int
    resolution_rate: float | None


class OutcomesOut(BaseModel):
    since: UtcDatetime
    until: UtcDatetime
    outcomes: dict[str, int]
    conversations: int
    resolved: int
    resolution_rate: float | None
    handoffs_by_reason: dict[str, int]
    cost_usd: float
    simulated_cost_usd: float = Field(
        description="the part of cost_usd no provider billed: the offline models' calls, "
        "priced as the models they stand in for"
    )
    cost_simulated: bool = Field(description="all of cost_usd is simulated: nothing was billed")
    cost_per_resolved_usd: float | None
    cache_hit_rate_by_profile: dict[str, float]
    days: list[DayOut]


@router.get("/gaps", responses=documented(401, 403, 422))
async def gaps(
    prefix: TenantPrefix,
    when: Period,
    reporter: ReporterDep,
    offset: Annotated[int, Query(ge=0, le=10_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> GapReportOut:
    """The questions the bot did not answer from the documentation (not found, web
    research, handed to a person) or answered with a 👎, grouped by topic, the largest
    group first; each with its trend against the previous period, examples linked to
    their transcripts, the closest pages and the cost. Computed once per minute and period."""
    return GapReportOut.model_validate(await reporter.report(*when, prefix, offset, limit))


@router.get("/outcomes", responses=documented(401, 403, 422))
async def outcomes(
    prefix: TenantPrefix, when: Period, runtime: RuntimeDep, reporter: ReporterDep
) -> OutcomesOut:
    """Turns' outcomes per day, the resolution rate (conversations answered by the bot
    without a person, a 👎, a follow-up that says the answer failed or asks the same
    again, or a failure), handoffs by reason, cost per resolved conversation and the
    prompt-cache hit rate per memory profile."""
    unresolved = await reporter.unresolved(*when, prefix)
    async with runtime.sessions() as session:
        report = await outcome_report(session, *when, prefix, unresolved)
    return OutcomesOut(
        since=report.since,
        until=report.until,
        outcomes=dict(report.outcomes),
        conversations=report.conversations,
        resolved=report.resolved,
        resolution_rate=report.resolution_rate,
        handoffs_by_reason=dict(report.handoffs_by_reason),
        cost_usd=report.cost_usd,
        simulated_cost_usd=report.simulated_cost_usd,
        cost_simulated=report.cost_simulated,
        cost_per_resolved_usd=report.cost_per_resolved,
        cache_hit_rate_by_profile=report.cache_hit_rate_by_profile,
        days=[
            DayOut(
                day=day.day,
                outcomes=dict(day.outcomes),
                conversations=day.conversations,
                resolved=day.resolved,
                resolution_rate=day.resolution_rate,
            )
            for day in report.days
        ],
    )
