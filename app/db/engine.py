"""Engines and sessions. The app runs async; Alembic and the CLI use the sync driver.

SQLite serves concurrent turns when every connection waits for the write lock instead of
failing ("database is locked"): write-ahead logging (readers never wait for the writer),
a busy timeout, and the app's transactions take the write lock when they begin
(`BEGIN IMMEDIATE`), so a transaction that read first can never be refused it later. Sessions
on a `read_only` engine begin deferred instead: they read a snapshot and wait for no writer."""

from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from app.settings import DbSettings

# An execution option: the connection's transactions only read.
_READ_ONLY = "supportbot_read_only"
_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+psycopg"}
_SYNC_DRIVERS = {"sqlite": "sqlite", "postgresql": "postgresql+psycopg"}


def _with_driver(url: str, drivers: dict[str, str]) -> str:
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend not in drivers:
        raise ValueError(f"unsupported database {backend!r}: use sqlite or postgresql")
    if backend == "sqlite" and parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    return parsed.set(drivername=drivers[backend]).render_as_string(hide_password=False)


def async_url(url: str) -> str:
    return _with_driver(url, _ASYNC_DRIVERS)


def sync_url(url: str) -> str:
    return _with_driver(url, _SYNC_DRIVERS)


def _in_memory(url: str) -> bool:
    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def _pool_arguments(db: DbSettings) -> dict[str, Any]:
    if _in_memory(db.url):  # one static connection: nothing to size
        return {}
    return {
        "pool_size": db.pool_size,
        "max_overflow": db.max_overflow,
        "pool_timeout": db.pool_timeout,
    }


def _configure_sqlite(engine: Engine, db: DbSettings, *, immediate: bool) -> None:
    if engine.dialect.name != "sqlite":
        return

    def on_connect(connection: Any, _: Any) -> None:
        if immediate:
            connection.isolation_level = None  # the driver's own BEGIN; ours comes below
        cursor = connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(db.pool_timeout * 1000)}")
        if not _in_memory(db.url):
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()

    def begin_immediate(connection: Connection) -> None:
        reads = connection.get_execution_options().get(_READ_ONLY, False)
        connection.exec_driver_sql("BEGIN" if reads else "BEGIN IMMEDIATE")

    event.listen(engine, "connect", on_connect)
    if immediate:
        event.listen(engine, "begin", begin_immediate)


def make_async_engine(db: DbSettings) -> AsyncEngine:
    engine = create_async_engine(async_url(db.url), echo=db.echo, **_pool_arguments(db))
    _configure_sqlite(engine.sync_engine, db, immediate=True)
    return engine


def make_sync_engine(db: DbSettings) -> Engine:
    """For migrations and the CLI: the driver's own transactions (Alembic relies on them)."""
    engine = create_engine(sync_url(db.url), echo=db.echo)
    _configure_sqlite(engine, db, immediate=False)
    return engine


def read_only(engine: AsyncEngine) -> AsyncEngine:
    """The engine for transactions that only read: on SQLite they neither take nor wait
    for the write lock (elsewhere the same engine)."""
    return engine.execution_options(**{_READ_ONLY: True})


def make_session_factory(engine: AsyncEngine) -> async_sessionmaker:
    return async_sessionmaker(engine, expire_on_commit=False)
