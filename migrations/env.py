"""Alembic environment: the models' metadata and the database URL from the service settings."""

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection

from app.db.engine import make_sync_engine, sync_url
from app.db.models import Base
from app.settings import DbSettings, get_settings

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _db_settings() -> DbSettings:
    # Tests and the CLI may pass a URL explicitly; otherwise the settings decide.
    url = config.attributes.get("db_url")
    return DbSettings(url=url) if url else get_settings().db


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite cannot ALTER columns
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=sync_url(_db_settings().url),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_sync_engine(_db_settings())
    with engine.connect() as connection:
        _run(connection)
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
