"""The `supportbot` command line.

Each command imports what it uses (the settings, LangChain, Qdrant, the embedders) when it
runs: `supportbot --help` loads Typer and the command modules only.
"""

import logging
import sys
from functools import partial
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import DefaultPlaceholder

from app import conversations_cli
from app import kb_cli as knowledge_cli
from app.answers import cli as answers_cli
from app.bench import cli as bench_cli
from app.insights import cli as insights_cli
from app.memory import cli as memory_cli
from bot import cli as telegram_cli
from evals import cli as eval_cli


class ReadableCommand(TyperCommand):
    """Usage as click writes it: arguments by name in capitals (`PATH`, `[PATH]`), not
    Typer's `{path}`."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name != "argument":
                pieces.extend(param.get_usage_pieces(ctx))
                continue
            name = param.metavar or (param.name or "").upper()
            name = name if param.required else f"[{name}]"
            pieces.append(name if param.nargs == 1 else f"{name}...")
        return pieces


class ReadableGroup(TyperGroup):
    """A group whose list of commands gives each one's first sentence, wrapped to the
    terminal, never cut short with "..."."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [
            (name, command.get_short_help_str(limit=sys.maxsize))
            for name in self.list_commands(ctx)
            if (command := self.get_command(ctx, name)) is not None and not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def with_readable_help(app: typer.Typer) -> typer.Typer:
    """`app`'s commands and groups, and theirs, with the readable help above (the ones that
    chose a class of their own keep it)."""
    for command in app.registered_commands:
        if command.cls in (None, TyperCommand):  # Typer's default
            command.cls = ReadableCommand
    for group in app.registered_groups:
        if isinstance(group.cls, DefaultPlaceholder) or group.cls is None:
            group.cls = ReadableGroup
        assert group.typer_instance is not None
        with_readable_help(group.typer_instance)
    return app


class StartUpErrorsAsLines(ReadableGroup):
    """Every command's invalid settings and unreachable dependencies as one line each on
    stderr and exit code 2 (app/start_up_errors.py); `--debug` keeps the traceback."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise  # a command's own exit, already told
        except Exception as error:
            from app.start_up_errors import describe

            lines = None if ctx.meta.get(DEBUG) else describe(error)
            if lines is None:
                raise
            for line in lines:
                typer.echo(f"error: {line}", err=True)
            raise typer.Exit(2) from None


DEBUG = "supportbot.debug"
# Help and usage errors as click prints them, for every command: rich's boxes took 0.3–0.7 s
# of imports and layout per `--help` on a 2-core machine.
cli = typer.Typer(
    cls=StartUpErrorsAsLines,
    help="Customer-support chatbot service.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
db_cli = typer.Typer(help="Database migrations.", no_args_is_help=True)
usage_cli = typer.Typer(help="LLM usage, cached share and cost.", no_args_is_help=True)
cli.add_typer(db_cli, name="db")
langfuse_cli = typer.Typer(help="Langfuse: send again what did not arrive.", no_args_is_help=True)
cli.add_typer(usage_cli, name="usage")
cli.add_typer(langfuse_cli, name="langfuse")
docs_cli = typer.Typer(help="Documentation written from the code.", no_args_is_help=True)
cli.add_typer(docs_cli, name="docs")
cli.add_typer(
    conversations_cli.app, name="conversations", help="Stored conversations: memory profile."
)
cli.add_typer(knowledge_cli.app, name="kb", help="Knowledge base: ingest, search, stats.")
cli.add_typer(telegram_cli.app, name="telegram", help="The Telegram bot: long polling.")
cli.add_typer(eval_cli.app, name="eval", help="Evals: memory profiles on recorded conversations.")
cli.add_typer(bench_cli.app, name="bench", help="Benchmarks: prefix-cache simulator, load.")
cli.add_typer(
    insights_cli.app, name="insights", help="What the bot did not answer: knowledge gaps."
)
cli.add_typer(memory_cli.app, name="memory", help="What the bot remembers of people: forget.")
cli.add_typer(
    answers_cli.app, name="answers", help="Answers from the support team: list, export, import."
)


@cli.callback()
def options(
    ctx: typer.Context,
    debug: bool = typer.Option(
        False, "--debug", help="a traceback, not one line, for a bad setting or dependency"
    ),
) -> None:
    ctx.meta[DEBUG] = debug
    if debug:  # the service's own records at DEBUG, start-up failures with their traceback
        for name in ("app", "bot", "knowledge"):
            logging.getLogger(name).setLevel(logging.DEBUG)


@cli.command()
def serve(
    host: str | None = typer.Option(None, help="default: SUPPORTBOT_API__HOST (127.0.0.1)"),
    port: int = 8000,
) -> None:
    """Serve the HTTP API (and the staff widget)."""
    from app.loading import loading_without_collection

    with loading_without_collection():
        from app.api.exposure import UnsafeExposure, refuse_unsafe_exposure
        from app.api.local_sign_in import with_local_sign_in
        from app.api.starting import serve_while_loading, service_app
        from app.observability.logs import configure_logging
        from app.settings import get_settings
        from knowledge import stores
        from knowledge.client import StoreInUse

    settings = get_settings()
    if host is not None:
        settings = settings.model_copy(
            update={"api": settings.api.model_copy(update={"host": host})}
        )
    configure_logging(settings)
    settings, sign_in_link = with_local_sign_in(settings, port)
    try:
        refuse_unsafe_exposure(settings)
        # Opened before uvicorn starts so that a store another process holds is one line, not
        # a failed start-up; the runtime shares its client (one per store and process), and
        # it is released after the server stops, before interpreter shutdown.
        held = stores.acquire(settings.knowledge)
    except UnsafeExposure as refused:
        typer.echo(f"error: {refused}", err=True)
        raise typer.Exit(1) from None
    except StoreInUse as exc:
        typer.echo(
            f"error: {exc}: stop it (a `supportbot kb` command or another `supportbot serve`), "
            "or share a Qdrant server (SUPPORTBOT_KNOWLEDGE__QDRANT_URL)",
            err=True,
        )
        raise typer.Exit(1) from None
    if sign_in_link:  # a log line like the server's own, with its time and level
        logging.getLogger("supportbot").info(
            "The staff widget, signed in as a local staff member: %s", sign_in_link
        )
    try:
        # The port answers /healthz while the app loads (app/api/starting.py).
        # SIGTERM: no new connections; requests in flight get the grace period to finish.
        # The peer address stays the peer's: forwarding headers only mark an anonymous
        # request as passed on by a proxy (app/api/auth.py), whoever sent them.
        served = serve_while_loading(
            partial(service_app, settings),
            host=settings.api.host,
            port=port,
            log_config=None,
            timeout_graceful_shutdown=settings.api.shutdown_grace_seconds,
            proxy_headers=False,
        )
    finally:
        held.release()
    if not served:  # logged: one line for a setting or a dependency, else a traceback
        raise typer.Exit(2)


@db_cli.command()
def upgrade(revision: str = "head") -> None:
    """Migrate the configured database to REVISION (default: the latest)."""
    from app.db import migrate

    migrate.upgrade(revision=revision)
    typer.echo(f"database at {revision}")


@usage_cli.command("report")
def usage_report() -> None:
    """Per memory profile: turns, LLM calls, tokens, cached share and cost so far."""
    import asyncio

    from rich.console import Console
    from rich.table import Table

    from app.db import queries
    from app.db.engine import make_async_engine, make_session_factory
    from app.settings import get_settings

    async def load() -> dict[str, tuple[int, queries.UsageTotals]]:
        engine = make_async_engine(get_settings().db)
        try:
            async with make_session_factory(engine)() as session:
                return await queries.usage_by_profile(session)
        finally:
            await engine.dispose()

    by_profile = asyncio.run(load())
    if not by_profile:
        typer.echo("no LLM calls recorded yet")
        return
    table = Table("profile", "turns", "LLM calls", "input tokens", "cached share", "output tokens")
    table.add_column("cost (USD)", justify="right")
    for profile, (turns, totals) in sorted(by_profile.items()):
        table.add_row(
            profile,
            str(turns),
            str(totals.llm_calls),
            f"{totals.input_tokens:,}",
            f"{totals.cached_share:.1%}",
            f"{totals.output_tokens:,}",
            f"{totals.cost_usd:.4f}",
        )
    Console().print(table)


@langfuse_cli.command("backfill")
def langfuse_backfill() -> None:
    """Send again the feedback scores Langfuse never confirmed (an outage dropped them)."""
    import asyncio

    from app.db.engine import make_async_engine, make_session_factory
    from app.observability.backfill import Backfill, backfill_feedback
    from app.observability.tracing import Tracer
    from app.settings import get_settings

    settings = get_settings()
    if not settings.langfuse.enabled:
        typer.echo("error: Langfuse is off (set SUPPORTBOT_LANGFUSE__PUBLIC_KEY and SECRET_KEY)")
        raise typer.Exit(1)

    async def run() -> Backfill:
        engine = make_async_engine(settings.db)
        try:
            tracer = Tracer.from_settings(settings)
            return await backfill_feedback(make_session_factory(engine), tracer)
        finally:
            await engine.dispose()

    done = asyncio.run(run())
    typer.echo(f"{done.sent} feedback scores sent, {done.confirmed} confirmed by Langfuse")


@docs_cli.command("config")
def docs_config(
    check: bool = typer.Option(False, help="only compare: exit 1 when the file differs"),
) -> None:
    """Write docs/configuration.md from the settings models."""
    from app.config_docs import run

    raise typer.Exit(run(check=check))


with_readable_help(cli)


def main() -> None:
    cli()
