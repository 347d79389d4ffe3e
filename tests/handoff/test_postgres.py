"""Claims on PostgreSQL with two service instances (two engines, as two replicas would
have): for each handoff exactly one claim wins and the other loses cleanly."""

import asyncio
from collections.abc import AsyncIterator

import pytest

from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnRequest
from app.db.engine import make_async_engine
from app.handoff.service import HandoffService
from app.handoff.store import HandoffConflict
from app.runtime import agent_factory
from app.settings import DbSettings, Settings
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever
from tests.handoff.conftest import OFFICE_OPEN

CONVERSATIONS = 8


@pytest.fixture
async def replicas(
    settings: Settings, own_pg_url: str
) -> AsyncIterator[list[tuple[ChatService, HandoffService]]]:
    settings.db = DbSettings(url=own_pg_url)
    engines = [make_async_engine(settings.db) for _ in range(2)]
    services = []
    for engine in engines:
        turns = TurnStore(engine)
        handoffs = HandoffService(settings, turns, now=lambda: OFFICE_OPEN)
        agents = agent_factory(settings, CapturingChatModel(), KeywordRetriever(ARTICLES))
        services.append((ChatService(settings, turns, agents, handoffs=handoffs), handoffs))
    yield services
    for engine in engines:
        await engine.dispose()


async def claim(handoffs: HandoffService, handoff_id: int, staff: str) -> str:
    try:
        await handoffs.claim(handoff_id, staff)
    except HandoffConflict:
        return "lost"
    return "won"


async def test_of_two_replicas_claiming_at_once_one_wins(
    replicas: list[tuple[ChatService, HandoffService]],
) -> None:
    (chat_a, handoffs_a), (chat_b, handoffs_b) = replicas
    asks = [
        (chat_a if n % 2 else chat_b).handle_turn(
            TurnRequest("api", f"api:pg:{n}", "client", "Ann", "I want to talk to a human")
        )
        for n in range(CONVERSATIONS)
    ]
    await asyncio.gather(*asks)
    queue = await handoffs_b.queue()
    assert len(queue) == CONVERSATIONS

    outcomes = await asyncio.gather(
        *(
            asyncio.gather(claim(handoffs_a, h.id, "alice"), claim(handoffs_b, h.id, "bob"))
            for h in queue
        )
    )

    assert all(sorted(pair) == ["lost", "won"] for pair in outcomes)
    claimed = {h.id: h.claimed_by for h in await handoffs_a.queue(("claimed",))}
    for handoff, (alice, _) in zip(queue, outcomes, strict=True):
        assert claimed[handoff.id] == ("alice" if alice == "won" else "bob")


async def test_two_replicas_open_one_handoff_per_conversation(
    replicas: list[tuple[ChatService, HandoffService]],
) -> None:
    (chat_a, handoffs_a), (chat_b, _) = replicas
    asks = [
        chat.handle_turn(TurnRequest("api", "api:pg:same", "client", name, "talk to a human"))
        for chat, name in ((chat_a, "Ann"), (chat_b, "Bob"))
    ]
    await asyncio.gather(*asks)
    assert len(await handoffs_a.queue()) == 1
