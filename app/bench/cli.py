"""`supportbot bench`: the prefix-cache simulator's cost per call, the service under load, the
server's CPU per turn."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Annotated

import typer

app = typer.Typer(help="Benchmarks: the prefix-cache simulator, the service under load.")


@app.command()
def simulator(
    conversations: Annotated[
        list[int] | None, typer.Option(help="conversations in the cache (repeatable)")
    ] = None,
    rules: Annotated[
        str, typer.Option(help="cache rules: openai, anthropic, gemini, block16")
    ] = "gemini",
    calls: Annotated[int, typer.Option(min=1, help="measured calls per row")] = 500,
) -> None:
    """Microseconds per simulator call at 10 / 1,000 / 10,000 conversations."""
    from rich.console import Console
    from rich.table import Table

    from app.bench.prefix_cache import Workload, measure
    from app.observability.simulator import RULES

    if rules not in RULES:
        raise typer.BadParameter(f"use one of {', '.join(RULES)}", param_hint="--rules")
    workload = Workload(calls=calls)
    table = Table("conversations", "CPU µs per call", "cached share", "tokens stored")
    for count in conversations or [10, 1_000, 10_000]:
        row = measure(RULES[rules], count, workload)
        table.add_row(
            f"{count:,}",
            f"{row.microseconds_per_call:,.0f}",
            f"{row.cached_share:.1%}",
            f"{row.stored_tokens:,}",
        )
    Console().print(table)
    typer.echo(
        f"{rules} rules; every conversation: {workload.shared_tokens:,} shared tokens, "
        f"{workload.own_tokens:,} of its own, {workload.turn_tokens} more per measured call"
    )


SAMPLE_KB = Path(__file__).resolve().parents[2] / "knowledge" / "sample_kb"


@app.command()
def load(
    conversations: Annotated[int, typer.Option(min=1)] = 50,
    turns: Annotated[int, typer.Option(min=1, help="turns per conversation")] = 20,
    fail_rate: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="use the scripted provider, failing this share of model calls "
            "(timeouts, 429, 5xx, malformed, dropped); without it, the offline model",
        ),
    ] = None,
    postgres: Annotated[
        str | None, typer.Option(help="a PostgreSQL database URL; without it, a fresh SQLite file")
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="conversations in flight")] = 20,
    time_limit: Annotated[float, typer.Option(min=1, help="seconds; no turn starts later")] = 900,
    turn_timeout: Annotated[float, typer.Option(min=1, help="seconds per HTTP request")] = 120,
    api_key: Annotated[str | None, typer.Option(help="sent as a bearer token")] = None,
    kb: Annotated[Path, typer.Option(help="documents to ingest for the run")] = SAMPLE_KB,
    index: Annotated[
        Path | None, typer.Option(help="an already ingested local Qdrant folder, instead of --kb")
    ] = None,
) -> None:
    """Concurrent conversations over HTTP against the app on 127.0.0.1, then every
    conversation read back: lost messages, failed and stuck turns, order, latency, overhead.
    Exits with 1 when a message was lost, a turn stuck or stored out of order."""
    from app.bench.load import LoadPlan, run
    from app.settings import get_settings

    get_settings()  # a bad setting is told before anything is migrated or served
    plan = LoadPlan(
        conversations=conversations,
        turns=turns,
        concurrency=concurrency,
        fail_rate=fail_rate,
        time_limit_seconds=time_limit,
        turn_timeout_seconds=turn_timeout,
        api_key=api_key,
    )
    with TemporaryDirectory(prefix="supportbot-bench-") as scratch:
        folder = Path(scratch)
        database_url = postgres or f"sqlite:///{folder / 'bench.sqlite'}"
        report = run(plan, _migrated(database_url), index or _ingested(kb, folder / "qdrant"))
    for line in report.lines():
        typer.echo(line)
    if report.lost or report.duplicated or report.order_violations or report.unreadable:
        raise typer.Exit(1)
    if report.turn_status["running"]:
        raise typer.Exit(1)


def _migrated(database_url: str) -> str:
    from app.db import migrate

    migrate.upgrade(database_url)
    return database_url


def _ingested(documents: Path, index: Path) -> Path:
    from app.settings import Settings
    from knowledge.store import KnowledgeBase

    settings = Settings(_env_file=None).knowledge.model_copy(update={"qdrant_path": index})
    knowledge = KnowledgeBase.from_settings(settings)
    try:
        knowledge.ingest(documents)
    finally:
        knowledge.close()
    return index


@app.command()
def cpu(
    turns: Annotated[int, typer.Option(min=2, help="turns of one conversation per server")] = 20,
    postgres: Annotated[
        str,
        typer.Option(
            help="a PostgreSQL server where a database may be created for the run (and "
            "dropped after); its configurations are left out when it does not answer"
        ),
    ] = "postgresql://postgres@127.0.0.1:5432/postgres",
    kb: Annotated[Path, typer.Option(help="documents to ingest for the run")] = SAMPLE_KB,
    baseline: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            file_okay=False,
            help="another checkout of this repository (e.g. `git archive <commit> | tar -x "
            "-C DIR`) whose server runs each configuration too, named by the folder: two "
            "revisions side by side in one run (their database schemas must match)",
        ),
    ] = None,
) -> None:
    """Server CPU ms per turn (process CPU time, not wall), start-up time and RSS, for the
    offline model and the scripted OpenAI-compatible provider on SQLite and PostgreSQL, side
    by side in one run; see app/bench/cpu.py."""
    import datetime
    import platform

    from rich.console import Console
    from rich.table import Table

    from app.bench import cpu as bench
    from app.settings import get_settings

    get_settings()  # a bad setting is told before anything is migrated or served
    with TemporaryDirectory(prefix="supportbot-bench-") as scratch, _postgres(postgres) as pg:
        folder = Path(scratch)
        databases = {"sqlite": _migrated(f"sqlite:///{folder / 'bench.sqlite'}")}
        if pg is None:
            typer.echo(f"PostgreSQL at {postgres} does not answer: SQLite only", err=True)
        else:
            databases["postgresql"] = _migrated(pg)
        sources = [None, baseline.resolve()] if baseline else [None]
        configurations = [
            (bench.Configuration(model, database, source), url)
            for database, url in databases.items()
            for model in ("offline", "scripted")
            for source in sources
        ]
        figures = bench.run(configurations, _ingested(kb, folder / "qdrant"), folder, turns)
    header, rows = bench.table_rows(figures, turns)
    table = Table(*header, title="server CPU per turn, start-up and memory")
    for row in rows:
        table.add_row(*row)
    Console(width=200).print(table)
    processor = _processor_name()
    typer.echo(
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs "
        f"({processor}), {platform.python_implementation()} {platform.python_version()}; "
        f"load average {os.getloadavg()[0]:.1f}; {turns} turns of one conversation per server"
    )


@contextmanager
def _postgres(admin_url: str) -> Iterator[str | None]:
    """A new database on the server at `admin_url`, dropped afterwards; None when the server
    does not answer."""
    import uuid

    import psycopg
    from sqlalchemy import make_url

    name = f"supportbot_bench_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError:
        yield None
        return
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _processor_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown processor"
