"""`supportbot conversations`: what staff change on a stored conversation, from a shell.
Only typer is imported here; a command imports what it needs when it runs."""

import asyncio

import typer

app = typer.Typer(no_args_is_help=True)


@app.command("set-profile")
def set_profile(
    key: str = typer.Argument(help="the conversation key, e.g. telegram:-1001234567890"),
    profile: str = typer.Argument(help="a memory profile (SUPPORTBOT_PROFILES__DEFINITIONS)"),
) -> None:
    """Give one conversation another memory profile than its audience's.

    It applies from the conversation's next turn on; what earlier profiles cleared or
    folded stays so."""
    from app.chat.service import check_profile
    from app.chat.store import TurnStore
    from app.chat.types import UnknownProfile
    from app.db.engine import make_async_engine
    from app.settings import get_settings

    settings = get_settings()
    try:
        check_profile(settings, profile)
    except UnknownProfile as unknown:
        typer.echo(f"error: {unknown}", err=True)
        raise typer.Exit(1) from None

    async def store_it() -> bool:
        engine = make_async_engine(settings.db)
        try:
            return await TurnStore.for_engine(engine, settings.db).set_profile(key, profile)
        finally:
            await engine.dispose()

    if not asyncio.run(store_it()):
        typer.echo(f"error: no conversation {key!r}", err=True)
        raise typer.Exit(1)
    typer.echo(f"{key}: memory profile {profile} from its next turn on")
