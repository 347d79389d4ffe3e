"""`supportbot memory list/forget` against a fresh SQLite file."""

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.db.engine import make_async_engine, make_session_factory
from app.memory import store
from app.settings import get_settings

runner = CliRunner()
PERSON = "api|api:shop:|u-1"


async def _remember(texts: list[str], scope: str) -> None:
    engine = make_async_engine(get_settings().db)
    async with make_session_factory(engine)() as session:
        for text in texts:
            await store.remember(session, scope, text, conversation="api:shop:1",
                                 message_id=None, max_items=10)  # fmt: skip
        await session.commit()
    await engine.dispose()


def test_an_operator_lists_and_forgets_a_person(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPPORTBOT_DB__URL", f"sqlite:///{tmp_path / 'cli.db'}")
    get_settings.cache_clear()
    try:
        assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0
        asyncio.run(_remember(["our currency is CHF", "we use GnuCash 5"], PERSON))
        asyncio.run(_remember(["our currency is EUR"], "api|api:other:|u-1"))

        listed = runner.invoke(cli, ["memory", "list", "--person", PERSON])
        assert listed.exit_code == 0, listed.output
        assert [line.split("\t")[-1] for line in listed.output.splitlines()] == [
            "our currency is CHF",
            "we use GnuCash 5",
        ]
        forgotten = runner.invoke(cli, ["memory", "forget", "--person", PERSON])
        assert forgotten.output == f"{PERSON}: 2 item(s) forgotten\n"
        again = runner.invoke(cli, ["memory", "forget", "--person", PERSON])
        assert again.exit_code == 1 and "nothing is remembered" in again.output
        other = runner.invoke(cli, ["memory", "list", "--person", "api|api:other:|u-1"])
        assert other.output.endswith("\tour currency is EUR\n")
    finally:
        get_settings.cache_clear()
