"""Shared fixtures. No test reaches beyond this machine: sockets to other hosts fail."""

import ipaddress
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from app.api.main import create_app
from app.db import migrate
from app.db.engine import make_async_engine
from app.settings import DbSettings, KnowledgeSettings, Settings
from knowledge.store import KnowledgeBase
from tests.pg_server import resolve_admin_url, with_database

ROOT = Path(__file__).resolve().parents[1]
# What the tests read lives in the repo: these fixtures, the sample knowledge base, evals/.
FIXTURES = ROOT / "tests" / "fixtures"
PG_ADMIN_URL = resolve_admin_url()

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_local(address: Any) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX paths
        return True
    host = address[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if not _is_local(address):
        raise ConnectionRefusedError(f"tests may not connect to {address!r}")
    _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    if not _is_local(address):
        raise ConnectionRefusedError(f"tests may not connect to {address!r}")
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True, scope="session")
def block_network() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", _guarded_connect)
        patch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
        yield


def _admin(sql: str) -> None:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as connection:
        connection.execute(sql)


@pytest.fixture(scope="session")
def pg_database_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for this test session, dropped at the end."""
    name = f"supportbot_test_{uuid.uuid4().hex[:10]}"
    _admin(f'CREATE DATABASE "{name}"')
    yield with_database(PG_ADMIN_URL, name)
    _admin(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
def own_pg_url(pg_database_url: str) -> Iterator[str]:
    """A migrated database of this test's own, for tests that commit (concurrent turns on
    real pools): the rolled-back tests sharing the session's database never see its rows."""
    name = f"{make_url(pg_database_url).database}_{uuid.uuid4().hex[:6]}"
    _admin(f'CREATE DATABASE "{name}"')
    url = with_database(pg_database_url, name)
    migrate.upgrade(url)
    yield url
    _admin(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
async def pg_engine(pg_database_url: str) -> AsyncIterator[AsyncEngine]:
    migrate.upgrade(pg_database_url)
    engine = make_async_engine(DbSettings(url=pg_database_url))
    yield engine
    await engine.dispose()


@pytest.fixture
async def pg_connection(pg_engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection inside a transaction that is rolled back after the test."""
    async with pg_engine.connect() as connection:
        transaction = await connection.begin()
        yield connection
        await transaction.rollback()


@pytest.fixture
def pg_sessions(pg_connection: AsyncConnection) -> async_sessionmaker[AsyncSession]:
    """Sessions whose commits become savepoints of the test's rolled-back transaction."""
    return async_sessionmaker(
        bind=pg_connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    )


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Embedded defaults, with every file under the test's temporary folder."""
    return Settings(
        db=DbSettings(url=f"sqlite:///{tmp_path / 'supportbot.db'}"),
        knowledge=KnowledgeSettings(qdrant_path=tmp_path / "qdrant"),
        _env_file=None,
    )


SAMPLE_KB = ROOT / "knowledge" / "sample_kb"


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample knowledge base, ingested once per test session; tests only read it."""
    path = tmp_path_factory.mktemp("qdrant")
    knowledge = KnowledgeBase.from_settings(
        Settings(_env_file=None).knowledge.model_copy(update={"qdrant_path": path})
    )
    knowledge.ingest(SAMPLE_KB)
    knowledge.close()
    return path


class WarmClient(TestClient):
    """A TestClient entered once the app has loaded what the first turn needs (it starts
    answering before: /readyz says when), as a deployment waits for readiness."""

    def __enter__(self) -> "WarmClient":
        super().__enter__()
        deadline = time.monotonic() + 120
        while not self.get("/readyz").json()["warmed_up"] and time.monotonic() < deadline:
            time.sleep(0.02)
        return self


def make_client(settings: Settings, sample_index: Path) -> TestClient:
    """The app over the real runtime: these settings, the ingested sample knowledge base."""
    settings.knowledge.qdrant_path = sample_index
    migrate.upgrade(settings.db.url)
    return WarmClient(create_app(settings))


@pytest.fixture
def client(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    with make_client(settings, sample_index) as test_client:
        yield test_client
