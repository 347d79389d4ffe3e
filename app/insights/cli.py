"""`supportbot insights`: the knowledge-gap report in the terminal (a table) or as JSON for
scripts. Only typer is imported here; a command imports what it needs when it runs."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from datetime import timedelta

app = typer.Typer(no_args_is_help=True)


def _period(since: str) -> "timedelta":
    """`--since` as a length of time; anything else exits with code 2."""
    from app.insights.gaps import BadPeriod, parse_period

    try:
        return parse_period(since)
    except BadPeriod as bad:
        typer.echo(f"error: {bad}", err=True)
        raise typer.Exit(2) from None


@app.command("gaps")
def gaps(
    since: str = typer.Option("7d", help="the period up to now: 30m, 24h, 7d, 2w"),
    limit: int = typer.Option(20, min=1, help="groups shown, the largest first"),
    offset: int = typer.Option(0, min=0, help="groups skipped (the next page)"),
    prefix: str | None = typer.Option(None, help="only conversations whose key starts so"),
    as_json: bool = typer.Option(False, "--json", help="the report as JSON"),
) -> None:
    """The questions the bot did not answer from the documentation, or got a 👎 for,
    grouped by topic: count, trend against the previous period, closest pages, cost."""
    import asyncio
    import json
    from dataclasses import asdict
    from datetime import UTC, datetime

    from app.db.engine import make_async_engine, make_session_factory
    from app.insights.gaps import GapReport, reporter_for
    from app.settings import get_settings

    length = _period(since)
    settings = get_settings()

    async def load() -> GapReport:
        engine = make_async_engine(settings.db)
        try:
            reporter = reporter_for(settings, make_session_factory(engine))
            start, end = reporter.period(length, datetime.now(UTC))
            return await reporter.report(start, end, prefix, offset, limit)
        finally:
            await engine.dispose()

    report = asyncio.run(load())
    if as_json:
        typer.echo(json.dumps(asdict(report), default=str, ensure_ascii=False, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"Knowledge gaps {report.since:%Y-%m-%d %H:%M} to {report.until:%Y-%m-%d %H:%M} "
        f"UTC: {report.questions} questions, {report.total_groups} topics"
    )
    for column in ("#", "topic (most central question)", "words", "trend", "outcomes"):
        table.add_column(column, justify="right" if column in ("#", "trend") else "left")
    table.add_column("closest pages")
    table.add_column("cost $", justify="right")
    for group in report.groups:
        table.add_row(
            str(group.count),
            group.name,
            ", ".join(group.words),
            f"{group.trend:+d}",
            ", ".join(f"{name} {count}" for name, count in sorted(group.outcomes.items())),
            "\n".join(page.source for page in group.pages) or "none: write one",
            f"{group.cost_usd:.4f}" + (" sim." if group.cost_simulated else ""),
        )
    console = Console()
    console.print(table)
    if any(group.cost_simulated for group in report.groups):
        console.print("sim.: the offline model's calls, priced as the model it stands in for")


@app.command("questions")
def questions(
    out: Annotated[Path, typer.Argument(help="the YAML file to write")],
    since: str = typer.Option("7d", help="the period up to now: 30m, 24h, 7d, 2w"),
    prefix: str | None = typer.Option(None, help="only conversations whose key starts so"),
) -> None:
    """The period's questions the documentation did not answer, or whose answer got a 👎
    (requests for a person left out), as labelled questions for a person to review and add
    to the documentation's scope (app/insights/review.py)."""
    import asyncio
    from datetime import UTC, datetime

    from app.db.engine import make_async_engine, make_session_factory
    from app.insights.gaps import GapTurn, load_gap_turns, reporter_for
    from app.insights.review import review_file
    from app.settings import get_settings
    from knowledge.language import identify

    length = _period(since)  # a bad period exits before anything is read
    settings = get_settings()
    until = datetime.now(UTC)
    start = until - length

    async def load() -> list[GapTurn]:
        engine = make_async_engine(settings.db)
        try:
            sessions = make_session_factory(engine)
            failed = await reporter_for(settings, sessions).unresolved(start, until, prefix)
            async with sessions() as session:
                return await load_gap_turns(session, start, until, prefix, failed)
        finally:
            await engine.dispose()

    expected, fallback = settings.decisions.expected_languages, settings.knowledge.language

    def language(text: str) -> str:
        return identify(text, expected, fallback).language

    text = review_file(asyncio.run(load()), language, start, until)
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as error:
        typer.echo(f"error: cannot write {out}: {error.strerror or error}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"wrote {out}")
