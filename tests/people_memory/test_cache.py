"""What the memory block costs a returning customer's conversation: added input tokens per
turn and the cached share, memory on against off, in one run under the Gemini cache rules
of the prefix-cache simulator (price and TTL), a week between the conversations: past
every TTL."""

from dataclasses import dataclass, replace

from sqlalchemy.ext.asyncio import AsyncConnection

from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.chat.types import TurnRequest
from app.memory.scope import api_scope
from app.observability.simulator import GEMINI, PrefixCacheSimulator
from app.runtime import agent_factory
from app.settings import Settings
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever

WEEK = 7 * 24 * 3600.0
# The sample knowledge base's requests are short (~800 tokens): a 16-token minimum prefix
# lets them cache at all, as a real knowledge base's long requests do.
RULES = replace(GEMINI, min_prefix_tokens=16, min_prefix_by_model={})
FIRST = ["Remember that our currency is CHF", "Remember that we use GnuCash 5 on Windows"]
SECOND = [
    "How do I create an invoice?",
    "How do I record a partial payment?",
    "Where do I set the VAT rates?",
    "How do I create an invoice for a new customer?",
]


@dataclass
class Figures:
    input_tokens_per_turn: float
    cached_share: float
    items_shown: int  # lines of the memory block the model received


async def returning_customer(
    settings: Settings, connection: AsyncConnection, person: str, memory: bool
) -> Figures:
    settings.memory.audiences = ["client"] if memory else []
    model = CapturingChatModel()
    now = [0.0]
    service = ChatService(
        settings,
        TurnStore(connection),
        agent_factory(settings, model, KeywordRetriever(ARTICLES)),
        simulator=PrefixCacheSimulator(RULES),
        clock=lambda: now[0],
    )
    scope = api_scope("api:acme:", person)
    for text in FIRST:
        await service.handle_turn(TurnRequest("api", f"{person}:1", "client", "Ann", text,
                                              memory_scope=scope))  # fmt: skip
        now[0] += 60
    now[0] += WEEK
    model.calls.clear()
    records = []
    for text in SECOND:
        reply = await service.handle_turn(TurnRequest("api", f"{person}:2", "client", "Ann", text,
                                                      memory_scope=scope))  # fmt: skip
        records.append(reply.usage)
        now[0] += 60
    input_tokens = sum(u.input_tokens for u in records)
    cached = sum(u.cached_tokens for u in records)
    system = model.calls[0].messages[0].content
    block = system[1]["text"] if isinstance(system, list) else ""  # type: ignore[index]
    return Figures(input_tokens / len(SECOND), cached / input_tokens, block.count("\n- "))


async def test_the_memory_block_costs_little_and_keeps_the_cached_share(
    settings: Settings, pg_connection: AsyncConnection
) -> None:
    on = await returning_customer(settings, pg_connection, "p-on", memory=True)
    off = await returning_customer(settings, pg_connection, "p-off", memory=False)
    assert (on.items_shown, off.items_shown) == (len(FIRST), 0)
    added = on.input_tokens_per_turn - off.input_tokens_per_turn
    print(f"memory on {on}, off {off}, added per turn {added:.0f}")
    assert 0 < added < settings.memory.block_tokens * 3  # the block, in each model call
    assert on.cached_share >= off.cached_share - 0.02
