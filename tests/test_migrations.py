"""Migrations run on SQLite and PostgreSQL, and round-trip down and up again."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from app.db import migrate
from app.db.engine import sync_url
from app.db.models import Base
from tests.conftest import _admin

TABLES = set(Base.metadata.tables)


def tables(url: str) -> set[str]:
    engine = create_engine(sync_url(url))
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def round_trip(url: str) -> None:
    migrate.upgrade(url)
    assert tables(url) == TABLES
    assert {"conversations", "messages", "llm_calls", "summaries"} <= TABLES
    migrate.downgrade(url)
    assert tables(url) == set()
    migrate.upgrade(url)
    assert tables(url) == TABLES


def test_sqlite_round_trip(tmp_path: Path) -> None:
    round_trip(f"sqlite:///{tmp_path / 'nested' / 'db.sqlite'}")


@pytest.fixture
def empty_pg_url(pg_database_url: str) -> Iterator[str]:
    url = pg_database_url + "_migrations"
    name = url.rsplit("/", 1)[1]
    _admin(f'CREATE DATABASE "{name}"')
    yield url
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
