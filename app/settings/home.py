"""Where the service keeps its files: the root relative paths resolve against."""

import os
from pathlib import Path
from typing import Literal

from sqlalchemy.engine import make_url

Audience = Literal["staff", "client"]
AUDIENCES: tuple[Audience, ...] = ("staff", "client")
# The folder holding app/ and knowledge/: a source checkout, or site-packages once installed.
SOURCE_ROOT = Path(__file__).resolve().parents[2]


def default_home() -> Path:
    """The root of relative paths when SUPPORTBOT_HOME is unset: the source checkout the code
    runs from (`make run`, `pip install -e .`), else the user's data folder
    ($XDG_DATA_HOME/supportbot, by default ~/.local/share/supportbot)."""
    if (SOURCE_ROOT / "pyproject.toml").is_file():
        return SOURCE_ROOT
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data) / "supportbot"


def _sqlite_url_under(home: Path, url: str) -> str:
    """A SQLite URL whose relative file path is made absolute under `home`; others as given."""
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return url
    absolute = home / Path(database).expanduser()  # an absolute path stays what it is
    return parsed.set(database=str(absolute)).render_as_string(hide_password=False)
