"""`supportbot memory`: what the bot remembers of people, and an operator's erasure
request. Only typer is imported here; a command imports what it needs when it runs."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import typer

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

app = typer.Typer(no_args_is_help=True)
T = TypeVar("T")

PERSON_HELP = (
    "the person's memory scope: api|<key prefix>|<person>, widget|<staff>, "
    "telegram|<chat id>|<user id> or telegram|<chat id>|* (the chat's shared facts)"
)


def _on_database(work: "Callable[[AsyncSession], Awaitable[T]]") -> T:
    from app.db.engine import make_async_engine, make_session_factory
    from app.settings import get_settings

    async def run() -> T:
        engine = make_async_engine(get_settings().db)
        try:
            async with make_session_factory(engine)() as session:
                result = await work(session)
                await session.commit()
                return result
        finally:
            await engine.dispose()

    return asyncio.run(run())


@app.command("list")
def list_items(person: str = typer.Option(..., help=PERSON_HELP)) -> None:
    """The person's current items: id, when said, where, and the words."""
    from app.memory import store

    items = _on_database(lambda session: store.active_items(session, [person]))
    if not items:
        typer.echo(f"nothing is remembered of {person}")
    for item in items:
        source = f"{item.source_conversation} #{item.source_message_id}"
        typer.echo(f"{item.id}\t{item.created_at:%Y-%m-%d}\t{source}\t{item.text}")


@app.command()
def forget(
    person: str = typer.Option(..., help=PERSON_HELP),
    item: int | None = typer.Option(None, help="one item (and what it replaced); default all"),
) -> None:
    """Forget a person (an erasure request): their items go, and their words leave the
    archives recall_history searches."""
    from app.memory import store

    forgotten = _on_database(lambda session: store.forget(session, person, item))
    if not forgotten:
        typer.echo(f"error: nothing is remembered of {person}", err=True)
        raise typer.Exit(1)
    typer.echo(f"{person}: {forgotten.items} item(s) forgotten")
