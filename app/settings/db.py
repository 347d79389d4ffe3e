"""The database (`SUPPORTBOT_DB__…`)."""

from pydantic import BaseModel, Field, field_validator, model_validator
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError


class DbSettings(BaseModel):
    """The database: SQLite for one process, PostgreSQL for several replicas."""

    url: str = Field(
        "sqlite:///./var/supportbot.db",
        description="`sqlite:///…` or `postgresql://user:pass@host/db`",
    )
    echo: bool = Field(False, description="log every SQL statement")
    pool_size: int = Field(
        10, ge=1, description="connections kept open per process; a running turn holds one"
    )
    max_overflow: int = Field(
        10,
        ge=0,
        description="connections opened beyond pool_size under load, closed when idle; turns "
        "run at once = pool_size + max_overflow - 1, the others queue in order",
    )
    pool_timeout: float = Field(
        30.0,
        gt=0,
        description="seconds to wait for a free connection (on SQLite also for the write "
        "lock) before the request fails",
    )

    @field_validator("url")
    @classmethod
    def _url_sqlalchemy_reads(cls, url: str) -> str:
        try:
            make_url(url).get_dialect()
        except ArgumentError as unread:  # not a URL, or a database SQLAlchemy has no dialect for
            raise ValueError(f"not a database URL SQLAlchemy reads: {unread}") from None
        return url

    @model_validator(mode="after")
    def _room_for_turns(self) -> "DbSettings":
        if self.turn_connections < 1:
            raise ValueError(
                "pool_size + max_overflow must be at least 2: each running turn holds one "
                "connection and one stays free for everything else"
            )
        return self

    @property
    def turn_connections(self) -> int:
        """Turns one process runs at once (more wait their turn): one connection each,
        and one connection stays free for the rest (history, feedback, health checks)."""
        return self.pool_size + self.max_overflow - 1
