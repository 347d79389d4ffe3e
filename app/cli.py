"""The `supportbot` command line."""

import typer

from app.settings import get_settings
from bot import cli as telegram_cli
from knowledge import cli as knowledge_cli

cli = typer.Typer(help="Customer-support chatbot service.", no_args_is_help=True)
db_cli = typer.Typer(help="Database migrations.", no_args_is_help=True)
cli.add_typer(db_cli, name="db")
cli.add_typer(knowledge_cli.app, name="kb", help="Knowledge base: ingest, search, stats.")
cli.add_typer(telegram_cli.app, name="telegram", help="The Telegram bot: long polling.")


@cli.command()
def serve(host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve the HTTP API (and the staff widget)."""
    import uvicorn

    from app.api.main import create_app

    uvicorn.run(create_app(get_settings()), host=host, port=port)


@db_cli.command()
def upgrade(revision: str = "head") -> None:
    """Migrate the configured database to REVISION (default: the latest)."""
    from app.db import migrate

    migrate.upgrade(revision=revision)
    typer.echo(f"database at {revision}")


def main() -> None:
    cli()
