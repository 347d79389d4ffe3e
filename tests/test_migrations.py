"""Migrations run on SQLite and PostgreSQL, and round-trip down and up again."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, make_url

from app.db import migrate
from app.db.engine import sync_url
from app.db.models import Base
from tests.conftest import _admin
from tests.pg_server import with_database

# The schema the models define: each table's column names.
MODEL_SCHEMA = {
    name: {c.name for c in table.columns} for name, table in Base.metadata.tables.items()
}


def schema(url: str) -> dict[str, set[str]]:
    """The database's tables and their column names, as the migrations made them."""
    engine = create_engine(sync_url(url))
    try:
        inspector = inspect(engine)
        return {
            name: {c["name"] for c in inspector.get_columns(name)}
            for name in inspector.get_table_names()
            if name != "alembic_version"
        }
    finally:
        engine.dispose()


def round_trip(url: str) -> None:
    migrate.upgrade(url)
    assert {"conversations", "messages", "llm_calls", "summaries"} <= set(schema(url))
    assert schema(url) == MODEL_SCHEMA
    migrate.downgrade(url)
    assert schema(url) == {}
    migrate.upgrade(url)
    assert schema(url) == MODEL_SCHEMA


def test_sqlite_round_trip(tmp_path: Path) -> None:
    round_trip(f"sqlite:///{tmp_path / 'nested' / 'db.sqlite'}")


@pytest.fixture
def empty_pg_url(pg_database_url: str) -> Iterator[str]:
    name = f"{make_url(pg_database_url).database}_migrations"
    _admin(f'CREATE DATABASE "{name}"')
    yield with_database(pg_database_url, name)
    _admin(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_postgres_round_trip(empty_pg_url: str) -> None:
    round_trip(empty_pg_url)


def test_models_and_migrations_agree(tmp_path: Path) -> None:
    """Autogenerate finds nothing to do after `upgrade head`: no model change lacks a migration."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate.upgrade(url)
    engine = create_engine(sync_url(url))
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    engine.dispose()
    assert diff == []
