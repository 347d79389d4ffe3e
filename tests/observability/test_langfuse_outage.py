"""Langfuse down (answering 502, or hanging): turns are answered as usual, what is lost is
counted, and shutdown gives up on Langfuse within its bound."""

import time

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from app.db.models import Turn
from app.observability import metrics
from app.settings import Settings
from tests.fakes import CapturingChatModel

from .conftest import LocalServer
from .test_langfuse_equality import chat_settings, converse

SHUTDOWN_SECONDS = 2.0
# Longer than the shutdown bound: without it, closing would wait for the exports' retries.
EXPORT_SECONDS = 10


def _counted(name: str, signal: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, {"signal": signal}) or 0.0


def _dropped() -> tuple[float, float]:
    name = "supportbot_langfuse_dropped_total"
    return _counted(name, "spans"), _counted(name, "scores")


@pytest.mark.parametrize("outage", ["502", "hanging"])
async def test_an_outage_loses_counted_telemetry_and_no_turn(
    outage: str,
    settings: Settings,
    pg_connection: AsyncConnection,
    pg_sessions: async_sessionmaker[AsyncSession],
    local_server: LocalServer,
) -> None:
    if outage == "502":
        local_server.status = 502
    else:
        local_server.hang.set()
    settings = chat_settings(
        settings,
        local_server,
        export_timeout_seconds=EXPORT_SECONDS,
        shutdown_timeout_seconds=SHUTDOWN_SECONDS,
    )
    spans_before, scores_before = _dropped()
    failures_before = _counted("supportbot_langfuse_export_failures_total", "scores")

    tracer, service, key = await converse(
        settings, pg_connection, CapturingChatModel(), turns=3, flush=False
    )
    found = await service.find_turn(key, 3)
    assert found is not None
    await service.add_feedback(*found, helpful=True, comment=None, author="Ann")
    started = time.monotonic()
    tracer.close()
    closing = time.monotonic() - started

    async with pg_sessions() as session:
        statuses = list(await session.scalars(select(Turn.status).order_by(Turn.number)))
    assert statuses == ["ok", "ok", "ok"]
    assert closing < 3 * SHUTDOWN_SECONDS  # it was 16 s with the SDK's own shutdown
    spans_after, scores_after = _dropped()
    assert spans_after > spans_before
    assert scores_after - scores_before >= 3 * 3 + 1  # three scores a turn, one feedback
    if outage == "502":
        failures = _counted("supportbot_langfuse_export_failures_total", "scores")
        assert failures > failures_before
