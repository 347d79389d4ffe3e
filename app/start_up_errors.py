"""What stops a command or the service from starting through the configuration or the
machine rather than a bug: an invalid setting, a database or a Qdrant server that cannot be
reached. Each is told as one line naming the variable (or host:port) and what is wrong; other
errors keep their traceback.

Nothing heavy is imported here: the libraries whose errors are read are imported only when
they are already loaded (the error came from them)."""

import json
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

PREFIX = "SUPPORTBOT_"


class InvalidSetting(ValueError):
    """A setting's value found wrong where it is used (a model or an embedder by a name
    nothing provides), rather than by the settings' own validation."""

    def __init__(self, variable: str, reason: str) -> None:
        super().__init__(f"{variable}: {reason}")
        self.variable = variable
        self.reason = reason


def describe(error: BaseException) -> list[str] | None:
    """One line per problem when `error` (or an error it was raised from) is one of the
    known start-up problems, else None."""
    for cause in _chain(error):
        lines = _settings_problems(cause) or _unreachable(cause)
        if lines:
            return lines
    return None


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _settings_problems(error: BaseException) -> list[str]:
    if isinstance(error, InvalidSetting):
        return [f"invalid settings: {error.variable}: {error.reason}"]
    pydantic = sys.modules.get("pydantic")
    settings_errors = sys.modules.get("pydantic_settings")
    if pydantic is not None and isinstance(error, pydantic.ValidationError):
        if error.title != "Settings":
            return []
        return [
            f"invalid settings: {_variable(problem['loc'])}: {_reason(problem['msg'])}"
            for problem in error.errors(include_url=False)
        ]
    if settings_errors is not None and isinstance(error, settings_errors.SettingsError):
        undecoded = error.__cause__
        if isinstance(undecoded, json.JSONDecodeError):
            return [
                f"invalid settings: {variable}: not valid JSON ({undecoded.msg}, "
                f"column {undecoded.colno})"
                for variable in _variables_holding(undecoded.doc)
            ]
    return []


def _variable(loc: tuple[int | str, ...]) -> str:
    """The environment variable of a validation error's location, with the place inside
    its value when the error is deeper (a key of a JSON object)."""
    from app.settings import setting_fields

    parts = [str(part) for part in loc]
    variables = {variable for _, variable, _ in setting_fields()}
    for length in (2, 1):
        variable = PREFIX + "__".join(parts[:length]).upper()
        if len(parts) >= length and variable in variables:
            inside = ".".join(parts[length:])
            return f"{variable} (at {inside})" if inside else variable
    if parts:  # a rule across the fields of one group
        return f"{PREFIX}{parts[0].upper()}__*"
    return f"{PREFIX}*"


def _reason(message: str) -> str:
    return message.removeprefix("Value error, ")


def _variables_holding(value: str) -> list[str]:
    """The settings' variables (the environment's, then `.env`'s) set to `value`."""
    from app.settings import Settings, environment_variables

    known = environment_variables()
    given: dict[str, Any] = {}
    env_file = Settings.model_config.get("env_file")
    if isinstance(env_file, str) and os.path.isfile(env_file):
        from dotenv import dotenv_values

        given.update(dotenv_values(env_file))
    given.update(os.environ)
    found = [name.upper() for name, held in given.items() if held == value]
    return sorted({name for name in found if name in known}) or [f"{PREFIX}*"]


def one_line(error: BaseException) -> str:
    """`describe`'s lines as one, else the error's first line (for a log record that goes
    on without the error)."""
    return "; ".join(describe(error) or [_first_line(error)])


# SQLite's and PostgreSQL's words for a table that is not there
MISSING_TABLE = re.compile(r"no such table: (\w+)|relation \"(\w+)\" does not exist")


def _unreachable(error: BaseException) -> list[str]:
    sqlalchemy_errors = sys.modules.get("sqlalchemy.exc")
    if sqlalchemy_errors is not None and isinstance(error, sqlalchemy_errors.DBAPIError):
        if error.statement is None:  # raised while connecting, not by a statement
            return [_database_unreachable(error.orig)]
        if missing := MISSING_TABLE.search(str(error.orig)):
            return [
                f"the database has no table {missing[1] or missing[2]} ({PREFIX}DB__URL): "
                "run `supportbot db upgrade`"
            ]
        return []
    telegram_errors = sys.modules.get("telegram.error")
    if telegram_errors is not None:
        from app.settings import get_settings

        if isinstance(error, telegram_errors.InvalidToken):  # its message quotes the token
            return [f"invalid settings: {PREFIX}TELEGRAM__TOKEN: the Bot API rejected it"]
        if isinstance(error, telegram_errors.NetworkError) and not isinstance(
            error,
            telegram_errors.BadRequest,  # an answer, not a failed connection
        ):
            return [
                f"cannot reach the Telegram Bot API at {get_settings().telegram.api_base_url} "
                f"({PREFIX}TELEGRAM__API_BASE_URL): {error.message}"
            ]
    qdrant_errors = sys.modules.get("qdrant_client.http.exceptions")
    if qdrant_errors is not None and isinstance(error, qdrant_errors.ResponseHandlingException):
        from app.settings import get_settings

        url = get_settings().knowledge.qdrant_url
        return [
            f"cannot reach the Qdrant server {url} ({PREFIX}KNOWLEDGE__QDRANT_URL): "
            f"{_first_line(error.source)}"
        ]
    return []


def _database_unreachable(reason: BaseException | None) -> str:
    from sqlalchemy import make_url

    from app.settings import get_settings

    url = make_url(get_settings().db.url)
    if url.get_backend_name() == "sqlite":
        where = f"open the database {url.database}"
    else:
        where = f"reach the database at {url.host or 'localhost'}:{url.port or 5432}"
    # psycopg repeats the address before the reason: "connection to server at ... failed: "
    why = re.sub(r"^.*\bfailed: ", "", _first_line(reason))
    return f"cannot {where} ({PREFIX}DB__URL): {why}"


def _first_line(error: BaseException | None) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
