"""A bad setting or an unreachable dependency is one line on stderr naming the variable (or
host:port) and what is wrong, exit code 2, for every command; `--debug` keeps the traceback."""

import socket
import types
import typing
from collections.abc import Iterator
from datetime import time
from pathlib import Path
from typing import Any

import pytest
import typer.main
from pydantic import BaseModel
from typer.testing import CliRunner, Result

from app.agent.models import build_chat_model
from app.cli import cli
from app.runtime import Runtime
from app.settings import LLMSettings, Settings, get_settings, setting_fields
from app.start_up_errors import describe

runner = CliRunner()

# Settings whose every text is a valid value (names, secrets, paths, a prompt): found wrong,
# if at all, where they are used. The model and embedder names are checked at start-up (below).
FREE_TEXT = {
    "SUPPORTBOT_LLM__MODEL",
    "SUPPORTBOT_LLM__SUMMARY_MODEL",
    "SUPPORTBOT_LLM__EXPERT_MODEL",
    "SUPPORTBOT_LLM__FALLBACK_MODEL",
    "SUPPORTBOT_LLM__API_KEY",
    "SUPPORTBOT_KNOWLEDGE__QDRANT_PATH",
    "SUPPORTBOT_KNOWLEDGE__QDRANT_API_KEY",
    "SUPPORTBOT_KNOWLEDGE__COLLECTION",
    "SUPPORTBOT_KNOWLEDGE__SAMPLE_PATH",
    "SUPPORTBOT_KNOWLEDGE__EMBEDDER",
    "SUPPORTBOT_KNOWLEDGE__MODEL_CACHE_DIR",
    "SUPPORTBOT_KNOWLEDGE__LANGUAGE",  # a language without a stemmer is searched unstemmed
    "SUPPORTBOT_LANGFUSE__PUBLIC_KEY",
    "SUPPORTBOT_LANGFUSE__SECRET_KEY",
    "SUPPORTBOT_LANGFUSE__ENVIRONMENT",
    "SUPPORTBOT_LANGFUSE__RELEASE",
    # a model the price table lacks is an unpriced one
    "SUPPORTBOT_OBSERVABILITY__OFFLINE_PRICED_AS",
    "SUPPORTBOT_OBSERVABILITY__OFFLINE_HELPER_PRICED_AS",
    "SUPPORTBOT_TELEGRAM__TOKEN",
    "SUPPORTBOT_TELEGRAM__WEBHOOK_SECRET",
    "SUPPORTBOT_WIDGET__TRUSTED_USER_HEADER",
    "SUPPORTBOT_API__HOST",
    "SUPPORTBOT_CHAT__SYSTEM_PROMPT",
    "SUPPORTBOT_EXPERT__TAVILY_API_KEY",
    "SUPPORTBOT_ADMIN_TOKEN",
    "SUPPORTBOT_HOME",
}
ANY_TEXT = "nonsense value"
FIELDS = {variable: field for _, variable, field in setting_fields()}


def bad_value(annotation: Any) -> str:
    """A value the setting's type cannot hold (text for a plain string)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        (held,) = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return bad_value(held)
    if origin is typing.Literal:
        return "none-of-these"
    if origin in (dict, list, tuple) or (
        isinstance(annotation, type) and issubclass(annotation, BaseModel)
    ):
        return "{not json"
    return {bool: "maybe", int: "many", float: "lots", time: "25:99"}.get(annotation, ANY_TEXT)


@pytest.fixture(autouse=True)
def fresh_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for variable in FIELDS:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("SUPPORTBOT_DB__URL", f"sqlite:///{tmp_path / 'start.db'}")
    monkeypatch.setenv("SUPPORTBOT_KNOWLEDGE__QDRANT_PATH", str(tmp_path / "qdrant"))
    monkeypatch.chdir(tmp_path)  # no .env
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def one_error_line(result: Result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    (line,) = result.output.splitlines()
    assert line.startswith("error: "), line
    return line


@pytest.mark.parametrize("variable", sorted(FIELDS.keys() - FREE_TEXT))
def test_every_setting_with_a_bad_value_is_one_line_naming_it(variable: str) -> None:
    value = bad_value(FIELDS[variable].annotation)
    line = one_error_line(runner.invoke(cli, ["db", "upgrade"], env={variable: value}))
    assert line.startswith(f"error: invalid settings: {variable}"), line


@pytest.mark.parametrize("variable", sorted(FREE_TEXT))
def test_a_free_text_setting_takes_any_text(variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The list above holds no setting that does reject text."""
    monkeypatch.setenv(variable, ANY_TEXT)
    assert Settings()


def test_free_text_is_only_where_the_type_holds_any_text() -> None:
    for variable in FREE_TEXT:
        assert bad_value(FIELDS[variable].annotation) == ANY_TEXT, variable


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("SUPPORTBOT_DB__URL", "nonsense", "not a database URL"),
        ("SUPPORTBOT_DB__URL", "mysqlx://host/db", "not a database URL"),
        ("SUPPORTBOT_API__KEYS", "abc", "not valid JSON"),
        ("SUPPORTBOT_API__KEYS", '{"ann": {"key": "short"}}', ""),  # inside the JSON
        ("SUPPORTBOT_DB__POOL_SIZE", "1", "pool_size + max_overflow"),  # across two fields
        ("SUPPORTBOT_API__RATE_LIMIT_STORAGE_URL", "redis://host:6379/0", "async"),
        ("SUPPORTBOT_TELEGRAM__API_BASE_URL", "api.telegram.org/bot", "http"),
        ("SUPPORTBOT_KNOWLEDGE__SOURCES", '[{"location": "d", "every_hours": 0}]', "(at 0.every"),
        ("SUPPORTBOT_KNOWLEDGE__SOURCES", '[{"location": "ftp://h/", "every_hours": 1}]', "http"),
        (
            "SUPPORTBOT_KNOWLEDGE__SOURCES",
            '[{"location": "d", "every_hours": 1, "colection": "kb"}]',
            "(at 0.colection): Extra inputs",
        ),
        (
            "SUPPORTBOT_KNOWLEDGE__SOURCES",
            '[{"location": "d", "every_hours": 1}, {"location": "d", "every_hours": 2}]',
            "listed twice",
        ),
    ],
)
def test_values_of_the_right_type_that_are_still_wrong(
    variable: str, value: str, words: str
) -> None:
    env = {variable: value, "SUPPORTBOT_DB__MAX_OVERFLOW": "0"}
    line = one_error_line(runner.invoke(cli, ["db", "upgrade"], env=env))
    assert variable.rsplit("__", 1)[0] in line and words in line, line


def placeholder(param: Any) -> list[str]:
    return [param.opts[0], "x"] if param.param_type_name == "option" else ["x"]


def leaf_commands() -> Iterator[tuple[list[str], list[str]]]:
    """(words of each command, a placeholder "x" for each required parameter)."""

    def walk(command: Any, path: list[str]) -> Iterator[tuple[list[str], list[str]]]:
        subcommands = getattr(command, "commands", {})
        for name, sub in subcommands.items():
            yield from walk(sub, [*path, name])
        if not subcommands:
            required = [param for param in command.params if param.required]
            yield path, [word for param in required for word in placeholder(param)]

    yield from walk(typer.main.get_command(cli), [])


# Commands that read no settings: the configuration's docs, the bench of the cache simulator
# and the eval of fact kinds (files of the repository only).
NO_SETTINGS = {"docs config", "bench simulator", "eval kinds"}
COMMANDS = [
    pytest.param(words, args, id=" ".join(words))
    for words, args in leaf_commands()
    if " ".join(words) not in NO_SETTINGS
]


@pytest.mark.parametrize(("command", "args"), COMMANDS)
@pytest.mark.parametrize("variable", ["SUPPORTBOT_DB__POOL_SIZE", "SUPPORTBOT_API__KEYS"])
def test_every_command_tells_a_bad_setting_in_one_line(
    command: list[str], args: list[str], variable: str, tmp_path: Path
) -> None:
    """`many`: a number of the wrong type; not JSON."""
    page = tmp_path / "page.md"  # what a command reads that is given a file
    page.write_text("# Invoices\n\nCreate one from the Business menu.\n")
    placed = [str(page) if word == "x" else word for word in args]
    line = one_error_line(runner.invoke(cli, [*command, *placed], env={variable: "many"}))
    assert line.startswith(f"error: invalid settings: {variable}: "), line


def test_the_commands_are_all_walked() -> None:
    walked = {" ".join(words) for words, _ in leaf_commands()}
    assert {"serve", "db upgrade", "telegram run", "kb ingest", "insights gaps"} <= walked
    assert walked >= NO_SETTINGS


def test_debug_keeps_the_traceback() -> None:
    debugged = runner.invoke(cli, ["--debug", "db", "upgrade"], env={"SUPPORTBOT_API__KEYS": "a"})
    assert debugged.exit_code == 1 and debugged.exception is not None
    assert type(debugged.exception).__name__ == "SettingsError"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("command", [["db", "upgrade"], ["insights", "gaps"], ["usage", "report"]])
def test_an_unreachable_database_is_one_line_with_its_address(command: list[str]) -> None:
    port = closed_port()
    url = f"postgresql+psycopg://bot:secret@127.0.0.1:{port}/supportbot"
    line = one_error_line(runner.invoke(cli, command, env={"SUPPORTBOT_DB__URL": url}))
    assert line.startswith(f"error: cannot reach the database at 127.0.0.1:{port} ("), line
    assert "SUPPORTBOT_DB__URL" in line and "secret" not in line


def test_a_database_never_migrated_says_what_to_run() -> None:
    line = one_error_line(runner.invoke(cli, ["insights", "gaps"]))
    assert "run `supportbot db upgrade`" in line and "SUPPORTBOT_DB__URL" in line, line


def test_an_unreachable_telegram_bot_api_is_one_line() -> None:
    env = {
        "SUPPORTBOT_TELEGRAM__TOKEN": "123:abc",
        "SUPPORTBOT_TELEGRAM__API_BASE_URL": f"http://127.0.0.1:{closed_port()}/bot",
    }
    line = one_error_line(runner.invoke(cli, ["telegram", "run"], env=env))
    assert line.startswith("error: cannot reach the Telegram Bot API at http://127.0.0.1:"), line
    assert "SUPPORTBOT_TELEGRAM__API_BASE_URL" in line and "abc" not in line


@pytest.mark.parametrize("setting", ["model", "summary_model", "expert_model", "fallback_model"])
def test_a_model_nothing_provides_names_its_setting(setting: str) -> None:
    llm = LLMSettings(**{setting: "no-such-model-family"})
    with pytest.raises(ValueError) as refused:
        build_chat_model("no-such-model-family", llm)
    assert describe(refused.value) == [
        f"invalid settings: SUPPORTBOT_LLM__{setting.upper()}: Unable to infer model provider "
        "for model='no-such-model-family'. Please specify 'model_provider' directly."
    ]


def test_a_model_named_in_code_is_not_a_setting() -> None:
    with pytest.raises(ValueError) as refused:
        build_chat_model("no-such-model-family", LLMSettings())
    assert describe(refused.value) is None


def test_an_embedder_nothing_provides_names_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPPORTBOT_KNOWLEDGE__EMBEDDER", "no-such-embedder")
    with pytest.raises(ValueError) as refused:
        Runtime.from_settings(get_settings())
    (line,) = describe(refused.value) or [""]
    assert line.startswith("invalid settings: SUPPORTBOT_KNOWLEDGE__EMBEDDER: unknown embedder")


def test_other_errors_are_not_described() -> None:
    assert describe(RuntimeError("a bug")) is None
    assert describe(KeyError("x")) is None
