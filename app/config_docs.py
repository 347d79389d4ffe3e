"""docs/configuration.md, written from the settings models (`supportbot docs config`).

Every variable Settings reads, with its type, its default and the field's description; a
field without a description stops the generator, so a new setting cannot go undocumented.
Defaults are read from the models, never from the environment, and paths inside the source
checkout are shown relative to it, so the file is the same on every machine.
"""

import json
import sys
import types
import typing
from dataclasses import dataclass
from datetime import time
from pathlib import Path
from typing import Any, Literal

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from app.settings import SOURCE_ROOT, Settings, setting_fields

DOC_PATH = SOURCE_ROOT / "docs" / "configuration.md"
COMMAND = "supportbot docs config"
# Defaults too big or too machine-bound to print; where to read them instead.
DEFAULTS_SHOWN_ELSEWHERE = {
    "SUPPORTBOT_HOME": "the source checkout; installed: `~/.local/share/supportbot`",
    "SUPPORTBOT_OBSERVABILITY__PRICES": "the table in `app/observability/prices.toml`",
    "SUPPORTBOT_PROFILES__DEFINITIONS": "`staff` and `client` ([memory.md](memory.md))",
}
# A default longer than this is printed under its group's table rather than in it.
LONGEST_INLINE_DEFAULT = 70

HEADER = f"""# Configuration

<!-- Generated from app/settings/ and knowledge/settings.py by `{COMMAND}`;
edit the models, not this file. -->

Everything is an environment variable `SUPPORTBOT_<GROUP>__<FIELD>` (or a line of `.env`
in the working directory); lists and maps are JSON, e.g.
`SUPPORTBOT_WIDGET__STAFF_TOKENS='{{"alice": "long-random-token"}}'`, and a nested value can
be set on its own, e.g. `SUPPORTBOT_PROFILES__DEFINITIONS__CLIENT__SUMMARY__KEEP_EXCHANGES=6`.
Every setting has a default, so the service runs with none. Relative paths resolve against
`SUPPORTBOT_HOME`, never the working directory; `supportbot kb stats` shows the absolute
store path. An invalid value, and a database, Qdrant server or Telegram Bot API that
cannot be reached, is one `error: …` line per problem naming the variable (or host:port) and
exit code 2, for every command; `supportbot --debug <command>` shows the traceback instead.
`supportbot serve` binds its port first: a problem found while its app starts is logged as
one line (`the service could not start: …`) and it exits with 2; a database that is down
when it starts is a one-line warning, and `/readyz` reports it until it is back.
"""


class UndocumentedSettings(ValueError):
    """Settings fields without a description: the reference would have a hole."""


@dataclass(frozen=True)
class Variable:
    name: str
    type: str
    default: str  # Markdown for the table's cell
    description: str
    long_default: str | None = None  # printed in full under the table


def groups() -> list[tuple[str, str, list[tuple[str, FieldInfo]]]]:
    """(title, the group model's docstring, its variables) per settings group, the
    top-level fields first."""
    by_group: dict[str, list[tuple[str, FieldInfo]]] = {}
    for group, variable, field in setting_fields():
        by_group.setdefault(group, []).append((variable, field))
    found = []
    for group, fields in sorted(by_group.items(), key=lambda item: item[0] != ""):
        model = Settings.model_fields[group].annotation if group else None
        intro = " ".join((getattr(model, "__doc__", None) or "").split())
        found.append((group or "general", intro, fields))
    return found


def undocumented() -> list[str]:
    """The variables whose field has no description."""
    return [name for _, _, fields in groups() for name, field in fields if not field.description]


def type_name(annotation: Any) -> str:
    """A reader's name for a field's type: `int`, `list of int`, `` `a` or `b` ``, …"""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        kept = [arg for arg in args if arg is not type(None)]
        return " or ".join(type_name(arg) for arg in kept)
    if origin is Literal:
        return " or ".join(f"`{value}`" for value in args)
    if origin is list:
        return f"list of {type_name(args[0])}"
    if origin is dict:
        return f"map {type_name(args[0])} → {type_name(args[1])}"
    if annotation is SecretStr:
        return "secret"
    if annotation is Path:
        return "path"
    if annotation is time:
        return "time `HH:MM`"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation.__name__ == "MemoryProfile":
            return "memory profile"
        return "{" + ", ".join(annotation.model_fields) + "}"
    return getattr(annotation, "__name__", str(annotation))


def _bounds(field: FieldInfo) -> str:
    signs = {Ge: "≥", Gt: ">", Le: "≤", Lt: "<"}
    return ", ".join(
        f"{sign} {getattr(constraint, kind.__name__.lower())}"
        for constraint in field.metadata
        for kind, sign in signs.items()
        if isinstance(constraint, kind)
    )


def _plain(value: Any) -> Any:
    """A default as JSON would carry it, paths inside the checkout made relative."""
    if isinstance(value, BaseModel):
        return _plain(value.model_dump())
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Path):
        return value.relative_to(SOURCE_ROOT).as_posix() if value.is_absolute() else str(value)
    if isinstance(value, time):
        return value.strftime("%H:%M")
    return value


def default_text(field: FieldInfo) -> str:
    """The default as plain text: a value, or `unset`, `empty` or `required`."""
    if field.is_required():
        return "required"
    value = _plain(field.get_default(call_default_factory=True, validated_data={}))
    if value is None:
        return "unset"
    if value == "":
        return "empty"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _variable(name: str, field: FieldInfo) -> Variable:
    kind = type_name(field.annotation)
    if bounds := _bounds(field):
        kind = f"{kind}, {bounds}"
    description = str(field.description)
    if name in DEFAULTS_SHOWN_ELSEWHERE:
        return Variable(name, kind, DEFAULTS_SHOWN_ELSEWHERE[name], description)
    default = default_text(field)
    if default in ("unset", "empty", "required"):
        return Variable(name, kind, default, description)
    if len(default) > LONGEST_INLINE_DEFAULT:
        return Variable(name, kind, "below", description, long_default=default)
    return Variable(name, kind, f"`{default}`", description)


def variables() -> list[tuple[str, str, list[Variable]]]:
    """(title, intro, variables) per group, for the page."""
    if missing := undocumented():
        raise UndocumentedSettings(
            "these settings have no description (add `description=` to the field in "
            f"app/settings.py): {', '.join(missing)}"
        )
    return [
        (title, intro, [_variable(name, field) for name, field in fields])
        for title, intro, fields in groups()
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    """The whole of docs/configuration.md."""
    parts = [HEADER]
    for title, intro, rows in variables():
        parts.append(f"\n## {title}\n")
        if intro:
            parts.append(f"\n{intro}\n")
        parts.append("\n| variable | type | default | meaning |\n|---|---|---|---|\n")
        parts.extend(
            f"| `{row.name}` | {_cell(row.type)} | {_cell(row.default)} | "
            f"{_cell(row.description)} |\n"
            for row in rows
        )
        parts.extend(
            f"\nThe default of `{row.name}`:\n\n```text\n{row.long_default}\n```\n"
            for row in rows
            if row.long_default
        )
    return "".join(parts)


def write_or_check(path: Path, *, check: bool) -> str | None:
    """Write the page to `path`, or with `check` compare it; the problem, None when fine."""
    page = render()
    if check:
        if not path.is_file():
            return f"{path} does not exist: run `{COMMAND}`"
        if path.read_text(encoding="utf-8") != page:
            return f"{path} differs from the settings models: run `{COMMAND}` and commit it"
        return None
    path.write_text(page, encoding="utf-8")
    return None


def run(*, check: bool, path: Path = DOC_PATH) -> int:
    """`supportbot docs config [--check]`: the exit status, what happened printed."""
    try:
        problem = write_or_check(path, check=check)
    except UndocumentedSettings as missing:
        problem = str(missing)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    print(f"{path} {'matches the settings models' if check else 'written'}")
    return 0
