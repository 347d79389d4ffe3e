"""The memory profiles measured on a recorded session, through the real ChatService.

    python -m app.agent.memory.report            # the dev client session, real knowledge base

Runs every profile over the same session (offline model, the GnuCash help ingested into a
temporary local Qdrant unless --qdrant-path names one to reuse) and prints per profile the
context the model was sent at the last turn and the turns whose prefix changed.
"""

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from langchain_core.runnables import Runnable
from rich.console import Console
from rich.table import Table

from app.agent.memory.prefix import RequestRecorder, prefix_changes
from app.agent.offline import OfflineChatModel
from app.chat.locks import ConversationLocks
from app.chat.service import ChatService, TurnRequest
from app.db import migrate, queries
from app.db.engine import make_async_engine, make_session_factory
from app.runtime import agent_factory
from app.settings import DbSettings, Settings
from knowledge.store import KnowledgeBase
from knowledge.types import Retriever

SHARED = Path(__file__).resolve().parents[4] / "shared"
DEFAULT_SESSION = SHARED / "evals" / "client_session_dev.yaml"
DEFAULT_KB = SHARED / "kb" / "gnucash" / "gnucash-help-en"


@dataclass(frozen=True)
class ProfileFigures:
    profile: str
    turns: int
    last_context_tokens: int
    prefix_changed: list[int]
    agent_input_tokens: int  # all agent calls of the session
    summary_calls: int


async def run_session(
    settings: Settings, retriever: Retriever, profile: str, turns: list[dict[str, Any]], db: Path
) -> ProfileFigures:
    audiences = {audience: profile for audience in settings.profiles.by_audience}
    settings = settings.model_copy(
        update={"profiles": settings.profiles.model_copy(update={"by_audience": audiences})}
    )
    url = f"sqlite:///{db}"
    migrate.upgrade(url)
    engine = make_async_engine(DbSettings(url=url))
    recorder = RequestRecorder()
    agents = agent_factory(settings, OfflineChatModel(), retriever)

    def recorded(name: str) -> Runnable[Any, Any]:
        return agents(name).with_config(callbacks=[recorder])

    sessions = make_session_factory(engine)
    service = ChatService(settings, sessions, ConversationLocks(engine), recorded)
    key = f"report:{profile}"
    try:
        for turn in turns:
            await service.handle_turn(
                TurnRequest("eval", key, "client", str(turn["user"]), str(turn["text"]))
            )
        async with sessions() as session:
            conversation = await queries.get_conversation(session, key)
            assert conversation is not None
            calls = await queries.llm_calls(session, conversation)
    finally:
        await engine.dispose()
    return ProfileFigures(
        profile=profile,
        turns=len(recorder.turns),
        last_context_tokens=recorder.turns[-1].context_tokens,
        prefix_changed=prefix_changes(recorder.turns),
        agent_input_tokens=sum(c.input_tokens for c in calls if c.purpose == "agent"),
        summary_calls=sum(1 for c in calls if c.purpose == "summary"),
    )


def figures_table(figures: list[ProfileFigures]) -> Table:
    table = Table(title="memory profiles on one session (offline model)")
    for column in (
        "profile",
        "context tokens at last turn",
        "turns whose prefix changed",
        "agent input tokens (session)",
        "summary calls",
    ):
        table.add_column(column)
    for f in figures:
        table.add_row(
            f.profile,
            str(f.last_context_tokens),
            f"{len(f.prefix_changed)} of {f.turns - 1}",
            str(f.agent_input_tokens),
            str(f.summary_calls),
        )
    return table


def main(
    session: Annotated[Path, typer.Option(help="session YAML: turns with user, text")] = (
        DEFAULT_SESSION
    ),
    kb: Annotated[Path, typer.Option(help="folder to ingest into the knowledge base")] = (
        DEFAULT_KB
    ),
    qdrant_path: Annotated[
        Path | None, typer.Option(help="reuse this local Qdrant (default: a temporary one)")
    ] = None,
    profile: Annotated[list[str] | None, typer.Option(help="profiles to run (default: all)")] = (
        None
    ),
) -> None:
    settings = Settings(_env_file=None)
    turns = yaml.safe_load(session.read_text())["turns"]
    names = profile or list(settings.profiles.definitions)
    console = Console()
    with tempfile.TemporaryDirectory() as scratch:
        base = KnowledgeBase.open_local(qdrant_path or Path(scratch) / "qdrant")
        try:
            report = base.ingest(kb)
            console.print(f"knowledge base: {report.as_dict()}")
            figures = [
                asyncio.run(run_session(settings, base, name, turns, Path(scratch) / f"{i}.sqlite"))
                for i, name in enumerate(names)
            ]
        finally:
            base.close()
    console.print(figures_table(figures))
    for f in figures:
        console.print(f"{f.profile}: prefix changed at turns {f.prefix_changed}")


if __name__ == "__main__":
    typer.run(main)
