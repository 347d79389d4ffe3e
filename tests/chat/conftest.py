"""Tests that commit (concurrent turns on real pools) get a PostgreSQL database of their own,
so the rolled-back tests sharing the session's database never see their rows."""

import uuid
from collections.abc import Iterator

import pytest

from app.db import migrate
from tests.conftest import _admin


@pytest.fixture
def own_pg_url(pg_database_url: str) -> Iterator[str]:
    url = pg_database_url + f"_{uuid.uuid4().hex[:6]}"
    name = url.rsplit("/", 1)[1]
    _admin(f'CREATE DATABASE "{name}"')
    migrate.upgrade(url)
    yield url
    _admin(f'DROP DATABASE "{name}" WITH (FORCE)')
