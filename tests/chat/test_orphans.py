"""Turns left `running` by a process that is gone end `interrupted`: at start-up, when
the conversation's next turn begins, and periodically; a turn a live replica holds is left
alone."""

import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from app.chat.context import UNANSWERED_NOTE
from app.chat.service import ChatService
from app.chat.store import ORPHANED, TurnStore
from app.chat.types import TurnRequest
from app.db import migrate
from app.db.engine import make_async_engine, sync_url
from app.db.models import Conversation, Message, Turn
from app.runtime import agent_factory
from app.settings import DbSettings, Settings
from tests.conftest import make_client
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever


def left_running(session: Session, key: str, channel: str = "api") -> None:
    """What a process killed mid-turn leaves: the user's message and a `running` turn."""
    conversation = Conversation(key=key, channel=channel, audience="client", profile="client")
    session.add(conversation)
    session.flush()
    session.add(Turn(conversation_id=conversation.id, number=1, status="running"))
    session.add(
        Message(
            conversation_id=conversation.id,
            seq=1,
            turn=1,
            role="user",
            author="Ann",
            content="Is anyone there?",
        )
    )


def test_the_app_closes_turns_left_running_at_start_up(
    settings: Settings, sample_index: Path
) -> None:
    migrate.upgrade(settings.db.url)
    engine = create_engine(sync_url(settings.db.url))
    with Session(engine) as session:
        left_running(session, "crashed", channel="sweep-test")
        session.commit()
    with make_client(settings, sample_index) as client:
        exposed = client.get("/metrics").text
    with Session(engine) as session:
        turn = session.scalar(select(Turn))
    engine.dispose()

    assert turn is not None and (turn.status, turn.error) == ("interrupted", ORPHANED)
    counted = {
        (s.labels["status"], s.labels["channel"]): s.value
        for family in text_string_to_metric_families(exposed)
        for s in family.samples
        if s.name == "supportbot_turns_total"
    }
    assert counted[("interrupted", "sweep-test")] == 1


def test_the_app_closes_turns_left_running_while_it_serves(
    settings: Settings, sample_index: Path
) -> None:
    """A replica that crashed after this one started left a turn in a conversation that
    sees no next turn: the periodic sweep closes it."""
    settings.chat.orphan_sweep_seconds = 0.1
    engine = create_engine(sync_url(settings.db.url))
    with make_client(settings, sample_index):
        with Session(engine) as session:
            left_running(session, "crashed-later")
            session.commit()
        deadline = time.monotonic() + 30
        status = "running"
        while status == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
            with Session(engine) as session:
                status = session.scalar(select(Turn.status)) or ""
    engine.dispose()
    assert status == "interrupted"


@pytest.mark.postgres
async def test_a_turn_a_live_replica_holds_is_left_alone(
    settings: Settings, own_pg_url: str
) -> None:
    run = time.time_ns()
    held, left = f"orphans:{run}:held", f"orphans:{run}:left"
    sync = create_engine(sync_url(own_pg_url))
    with Session(sync) as session:
        left_running(session, held)
        left_running(session, left)
        session.commit()
    db = DbSettings(url=own_pg_url, pool_size=2, max_overflow=0)
    live_engine, starting_engine = make_async_engine(db), make_async_engine(db)
    live = TurnStore.for_engine(live_engine, db)
    try:
        async with live.hold(held):  # a replica still working on that conversation
            await TurnStore.for_engine(starting_engine, db).close_orphaned_turns()
        with Session(sync) as session:
            rows = session.execute(
                select(Conversation.key, Turn.status)
                .join(Turn, Turn.conversation_id == Conversation.id)
                .where(Conversation.key.in_([held, left]))
            )
            before = {key: status for key, status in rows.all()}
        model = CapturingChatModel()
        service = ChatService(
            settings, live, agent_factory(settings, model, KeywordRetriever(ARTICLES))
        )
        # Its next turn finds the old one still running, with nobody left to finish it.
        await service.handle_turn(TurnRequest("api", held, "client", "Ann", "Hello again?"))
    finally:
        await live_engine.dispose()
        await starting_engine.dispose()

    assert before == {held: "running", left: "interrupted"}
    with Session(sync) as session:
        statuses = list(
            session.scalars(
                select(Turn.status)
                .join(Conversation, Conversation.id == Turn.conversation_id)
                .where(Conversation.key == held)
                .order_by(Turn.number)
            )
        )
    assert statuses == ["interrupted", "ok"]
    human = [m.content for m in model.calls[0].messages if m.type == "human"]
    assert human == [f"{UNANSWERED_NOTE}\nAnn: Is anyone there?", "Ann: Hello again?"]
    sync.dispose()
