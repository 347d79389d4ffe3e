"""Shared fixtures. No test reaches beyond this machine: sockets to other hosts fail."""

import ipaddress
import logging
import secrets
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from app.api.main import create_app
from app.api.rate_limits import shared_storage
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


@pytest.fixture(autouse=True)
def no_log_handler_on_a_closed_stream() -> Iterator[None]:
    """A command run in-process (`serve` under CliRunner) points the root logger at the
    stream it was given, closed once the command returns: a later test's log line must not
    be written there (Python then prints a "Logging error" traceback into its output)."""
    yield
    root = logging.getLogger()
    for handler in root.handlers[:]:
        if getattr(getattr(handler, "stream", None), "closed", False):
            root.removeHandler(handler)


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


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, settings: Settings) -> str:
    """A migrated database of the test's own, on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        migrate.upgrade(settings.db.url)
        return settings.db.url
    url: str = request.getfixturevalue("own_pg_url")
    return url


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


class HttpClient(Protocol):
    """A test client of the app (Starlette's, or schemathesis's requests session)."""

    def get(self, url: str) -> Any: ...


def wait_until_warm(client: HttpClient, seconds: float = 120) -> None:
    """Until the app has loaded what the first turn needs (it starts answering before:
    /readyz says when), as a deployment waits for readiness."""
    deadline = time.monotonic() + seconds
    while not client.get("/readyz").json()["warmed_up"] and time.monotonic() < deadline:
        time.sleep(0.02)


class WarmClient(TestClient):
    """A TestClient entered once the app is warm (`wait_until_warm`)."""

    def __enter__(self) -> "WarmClient":
        super().__enter__()
        wait_until_warm(self)
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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _listens(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def redis_server(folder: Path, *arguments: str) -> Iterator[int]:
    """Debian's redis-server on a free loopback port with these arguments, keeping nothing
    on disk: its port. The test is skipped, with one line, when none can start."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("no redis-server to share the limits through: apt-get install redis-server")
    port = _free_port()
    log = folder / "redis.log"
    command = [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder)]
    command += ["--save", "", "--appendonly", "no", "--logfile", str(log), *arguments]
    process = subprocess.Popen(command)
    try:
        deadline = time.monotonic() + 30
        while not _listens(port):
            if process.poll() is not None or time.monotonic() > deadline:
                said = log.read_text().strip().splitlines() if log.exists() else []
                pytest.skip(f"redis-server did not start: {said[-1] if said else 'no log'}")
            time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="session")
def redis_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Redis server for this test session, with a password: the rate limits' storage URI
    naming its database 1."""
    password = secrets.token_hex(16)
    with redis_server(tmp_path_factory.mktemp("redis"), "--requirepass", password) as port:
        yield f"async+redis://:{password}@127.0.0.1:{port}/1"


@pytest.fixture
async def redis_url(redis_server_url: str) -> str:
    """The session's Redis, without the counters earlier tests left."""
    await shared_storage(redis_server_url).reset()
    return redis_server_url


@pytest.fixture(params=["memory", "redis"])
def rate_limit_storage_url(request: pytest.FixtureRequest) -> str | None:
    """Where the rate limits count: each process's memory (no URI), or a shared Redis."""
    if request.param == "memory":
        return None
    url: str = request.getfixturevalue("redis_url")
    return url
