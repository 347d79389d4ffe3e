"""The command line: migrations and the usage report, against a fresh SQLite file."""

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.settings import get_settings
from tests.conftest import make_client

runner = CliRunner()


@pytest.fixture
def env_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("SUPPORTBOT_DB__URL", url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


def test_db_upgrade_then_usage_report(env_db: str, sample_index: Path) -> None:
    upgraded = runner.invoke(cli, ["db", "upgrade"])
    assert upgraded.exit_code == 0, upgraded.output
    empty = runner.invoke(cli, ["usage", "report"])
    assert empty.exit_code == 0 and "no LLM calls recorded yet" in empty.output

    settings = get_settings().model_copy(deep=True)
    with make_client(settings, sample_index) as client:
        client.post(
            "/v1/conversations/c1/messages",
            json={"audience": "client", "author": "Ann", "text": "How do I create an invoice?"},
        )
    report = runner.invoke(cli, ["usage", "report"], env={"COLUMNS": "200"})
    assert report.exit_code == 0, report.output
    row = next(line for line in report.output.splitlines() if " client " in line)
    cells = [cell.strip() for cell in row.strip("│┃ ").split("│")]
    assert cells[:3] == ["client", "1", "2"]  # one turn, two model calls


# What `supportbot --help` must not load: each takes from 0.1 s to seconds to import.
HEAVY_MODULES = (
    "langchain",
    "langchain_core",
    "qdrant_client",
    "onnxruntime",
    "bpe_openai",
    "sqlalchemy",
    "matplotlib",
    "evals.harness",
    "app.settings",
    "rich",  # help as click prints it (`rich_markup_mode=None`): rich's layout took 0.3-0.7 s
)


# What the service does not load unless configured to use it: a Qdrant server's client, the
# expert's web research, the PDF reader, bpe-openai's Python tables, the Telegram library.
UNUSED_BY_THE_SERVICE = (
    "qdrant_client",
    "telegram",
    "app.agent.expert.agent",
    "trafilatura",
    "pypdf",
    "bpe_openai.registry",
)


def loaded_after(code: str, modules: tuple[str, ...]) -> list[str]:
    """Which of `modules` a fresh interpreter holds after running `code`."""
    script = f"import sys\n{code}\nprint(sorted(m for m in {modules!r} if m in sys.modules))\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    return list(ast.literal_eval(done.stdout.strip()))


def test_the_service_loads_what_it_does_not_use_only_when_used() -> None:
    code = "import app.api.main\nfrom knowledge.tokens import count_tokens\ncount_tokens('x')"
    assert loaded_after(code, UNUSED_BY_THE_SERVICE) == []


def test_help_loads_no_heavy_module() -> None:
    """In a fresh interpreter: `--help` of every command group imports none of them."""
    code = (
        "from typer.testing import CliRunner\n"
        "from app.cli import cli\n"
        "for group in ([], ['kb'], ['eval'], ['bench'], ['telegram'], ['db']):\n"
        "    assert CliRunner().invoke(cli, [*group, '--help']).exit_code == 0"
    )
    assert loaded_after(code, HEAVY_MODULES) == []
