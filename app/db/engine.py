"""Engines and sessions. The app runs async; Alembic and the CLI use the sync driver."""

from pathlib import Path

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from app.settings import DbSettings

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


def _enable_sqlite_foreign_keys(engine: Engine) -> None:
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", lambda conn, _: conn.execute("PRAGMA foreign_keys=ON"))


def make_async_engine(db: DbSettings) -> AsyncEngine:
    engine = create_async_engine(async_url(db.url), echo=db.echo)
    _enable_sqlite_foreign_keys(engine.sync_engine)
    return engine


def make_sync_engine(db: DbSettings) -> Engine:
    engine = create_engine(sync_url(db.url), echo=db.echo)
    _enable_sqlite_foreign_keys(engine)
    return engine


def make_session_factory(engine: AsyncEngine) -> async_sessionmaker:
    return async_sessionmaker(engine, expire_on_commit=False)
