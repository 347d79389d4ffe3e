"""Run the Alembic migrations from code (the CLI and the tests use this)."""

from pathlib import Path

from alembic import command
from alembic.config import Config

ALEMBIC_INI = Path(__file__).resolve().parents[2] / "alembic.ini"


def alembic_config(db_url: str | None = None) -> Config:
    config = Config(str(ALEMBIC_INI))
    config.attributes["configure_logger"] = False
    if db_url:
        config.attributes["db_url"] = db_url
    return config


def upgrade(db_url: str | None = None, revision: str = "head") -> None:
    command.upgrade(alembic_config(db_url), revision)


def downgrade(db_url: str | None = None, revision: str = "base") -> None:
    command.downgrade(alembic_config(db_url), revision)
