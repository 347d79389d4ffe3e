"""`supportbot kb …` answers a user's mistake with one line on stderr and a non-zero exit.

The commands run in this process through Typer's CliRunner, configured by environment
variables the way a user configures them; the store another process holds is held by a
real second process, and the installed `supportbot` runs once as a process of its own.
"""

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from qdrant_client import QdrantClient, models
from typer.testing import CliRunner, Result

from app import kb_support
from app.cli import cli
from app.settings import SOURCE_ROOT, get_settings
from knowledge import bench, stores
from tests.conftest import SAMPLE_KB

SUPPORTBOT = Path(sys.executable).with_name("supportbot")
# Opens a local store the way `supportbot serve` does and keeps it until stdin closes.
HOLD_STORE = (
    "import sys\n"
    "from pathlib import Path\n"
    "from knowledge.stores import open_local\n"
    "store = open_local(Path(sys.argv[1]))\n"
    "print('holding', flush=True)\n"
    "sys.stdin.read()\n"
    "store.release()\n"
)


@pytest.fixture
def configure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[pytest.MonkeyPatch]:
    """Settings from the variables a test sets, run from a folder with no `.env`."""
    for name in list(os.environ):
        if name.startswith("SUPPORTBOT_"):
            monkeypatch.delenv(name)
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("SUPPORTBOT_HOME", str(tmp_path / "home"))
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


@pytest.fixture
def held_store(tmp_path: Path) -> Iterator[Path]:
    store = tmp_path / "held"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_STORE, str(store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline().strip() == "holding"
    yield store
    holder.stdin.close()
    assert holder.wait(timeout=60) == 0


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def one_line_error(result: Result, code: int = 1) -> str:
    """The single stderr line of a command that failed on purpose (not by an exception)."""
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def assert_points_at_the_alternatives(line: str, store: Path) -> None:
    assert f"the local Qdrant store {store.resolve()} is open in another process" in line
    assert "supportbot serve" in line
    assert "POST /v1/admin/kb/ingest" in line
    assert "SUPPORTBOT_KNOWLEDGE__QDRANT_URL" in line


# ---------------------------------------------------------------- a store another process holds


@pytest.mark.parametrize(
    "command",
    [
        ["kb", "ingest", str(SAMPLE_KB)],
        ["kb", "search", "create an invoice"],
        ["kb", "stats"],
        ["kb", "ingest-sample"],
    ],
    ids=lambda command: command[1],
)
def test_a_store_held_by_another_process_is_named_with_the_alternatives(
    configure: pytest.MonkeyPatch, held_store: Path, command: list[str]
) -> None:
    configure.setenv("SUPPORTBOT_KNOWLEDGE__QDRANT_PATH", str(held_store))
    assert_points_at_the_alternatives(one_line_error(run(*command)), held_store)


def test_the_installed_command_prints_no_traceback_for_a_held_store(held_store: Path) -> None:
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("SUPPORTBOT_")
    }
    environment["SUPPORTBOT_KNOWLEDGE__QDRANT_PATH"] = str(held_store)
    finished = subprocess.run(
        [str(SUPPORTBOT), "kb", "search", "create an invoice"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 1, finished.stderr
    assert "Traceback" not in finished.stderr + finished.stdout
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1, finished.stderr
    assert_points_at_the_alternatives(lines[0], held_store)


def test_serve_says_which_store_another_process_holds(held_store: Path, tmp_path: Path) -> None:
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("SUPPORTBOT_")
    }
    environment["SUPPORTBOT_KNOWLEDGE__QDRANT_PATH"] = str(held_store)
    environment["SUPPORTBOT_DB__URL"] = f"sqlite:///{tmp_path / 'serve.db'}"
    finished = subprocess.run(
        [str(SUPPORTBOT), "serve", "--port", "0"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 1, finished.stderr
    assert "Traceback" not in finished.stderr
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1, finished.stderr
    assert f"the local Qdrant store {held_store.resolve()} is open in another process" in lines[0]
    assert "SUPPORTBOT_KNOWLEDGE__QDRANT_URL" in lines[0]


# ---------------------------------------------------------------- collections and store paths


@pytest.mark.parametrize("command", ["search", "stats"])
def test_a_collection_that_does_not_exist_lists_the_ones_that_do(
    configure: pytest.MonkeyPatch, sample_index: Path, command: str
) -> None:
    configure.setenv("SUPPORTBOT_KNOWLEDGE__QDRANT_PATH", str(sample_index))
    arguments = ["kb", command, "--collection", "manuals"]
    if command == "search":
        arguments.insert(2, "create an invoice")
    line = one_line_error(run(*arguments))
    assert f"no collection 'manuals' in the local Qdrant store {sample_index.resolve()}" in line
    assert line.endswith("it holds kb")


def test_a_relative_store_path_resolves_against_home_not_the_working_directory(
    configure: pytest.MonkeyPatch, sample_index: Path
) -> None:
    configure.setenv("SUPPORTBOT_HOME", str(sample_index.parent))
    configure.setenv("SUPPORTBOT_KNOWLEDGE__QDRANT_PATH", sample_index.name)
    result = run("kb", "stats", "--json")
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["location"] == f"local:{sample_index.resolve()}"
    assert stats["documents"] == len(list(SAMPLE_KB.rglob("*.md")))


def test_stats_of_an_empty_store_prints_its_absolute_path(
    configure: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    line = one_line_error(run("kb", "stats"))
    store = tmp_path / "home" / "var" / "qdrant"
    assert f"no collection 'kb' in the local Qdrant store {store}; it holds none" in line
    assert "supportbot kb ingest PATH" in line


def test_a_store_path_that_is_a_file_is_named(
    configure: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    not_a_folder = tmp_path / "qdrant.txt"
    not_a_folder.write_text("x")
    configure.setenv("SUPPORTBOT_KNOWLEDGE__QDRANT_PATH", str(not_a_folder))
    line = one_line_error(run("kb", "stats"))
    assert f"cannot open the local Qdrant store {not_a_folder}" in line


def test_an_unreachable_qdrant_server_is_named(configure: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    configure.setenv("SUPPORTBOT_KNOWLEDGE__QDRANT_URL", url)
    line = one_line_error(run("kb", "stats"))
    assert f"cannot reach the Qdrant server {url}" in line


class _RefusingQdrant(BaseHTTPRequestHandler):
    """A Qdrant server that refuses the API key, as Qdrant does: 401 and a JSON error."""

    def do_GET(self) -> None:
        body = b'{"status":{"error":"Must provide an API key or an Authorization bearer token"}}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_qdrant_server_that_refuses_the_key_is_named(configure: pytest.MonkeyPatch) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RefusingQdrant)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        configure.setenv("SUPPORTBOT_KNOWLEDGE__QDRANT_URL", url)
        configure.setenv("SUPPORTBOT_KNOWLEDGE__QDRANT_API_KEY", "wrong")
        line = one_line_error(run("kb", "search", "create an invoice"))
    finally:
        server.shutdown()
        server.server_close()
    assert line == (
        f"error: the Qdrant server {url} answered 401 Unauthorized: "
        "check SUPPORTBOT_KNOWLEDGE__QDRANT_API_KEY"
    )


# ---------------------------------------------------------------- what is ingested


def test_ingesting_a_path_that_does_not_exist(configure: pytest.MonkeyPatch) -> None:
    line = one_line_error(run("kb", "ingest", "docs"), code=2)
    assert line == f"error: no such file or folder: {Path.cwd() / 'docs'}"


def test_ingesting_a_file_that_is_not_a_document(
    configure: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a document")
    line = one_line_error(run("kb", "ingest", str(notes)), code=2)
    assert f"{notes} is not HTML, Markdown or PDF" in line and ".md" in line


def test_ingesting_a_folder_without_documents(
    configure: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a document")
    line = one_line_error(run("kb", "ingest", str(empty)), code=2)
    assert f"no HTML, Markdown or PDF files under {empty}" in line
    assert not (tmp_path / "home" / "var" / "qdrant").exists()  # the store was never opened


def test_a_collection_made_by_another_embedder(
    configure: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    other = stores.open_local(store)
    other.ensure_collection("kb", 3, "another embedder")
    other.release()
    configure.setenv("SUPPORTBOT_KNOWLEDGE__QDRANT_PATH", str(store))
    line = one_line_error(run("kb", "ingest", str(SAMPLE_KB)))
    assert "collection 'kb' holds 3-dimensional vectors" in line


def local_mode_store(path: Path) -> Path:
    """A store as qdrant-client's local mode wrote it before Qdrant Edge."""
    client = QdrantClient(path=str(path))
    client.create_collection(
        "kb", vectors_config={"dense": models.VectorParams(size=3, distance=models.Distance.COSINE)}
    )
    client.close()
    return path


def test_a_local_mode_store_found_at_start_up_says_how_to_move_it(
    configure: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = local_mode_store(tmp_path / "store")
    configure.setenv("SUPPORTBOT_KNOWLEDGE__QDRANT_PATH", str(store))
    held = stores.acquire(get_settings().knowledge)  # as `supportbot serve` does
    held.release()
    [record] = [r for r in caplog.records if r.name == "knowledge.client"]
    assert record.levelname == "WARNING"
    assert f"{store.resolve()} holds a knowledge base in qdrant-client's local mode" in (
        record.message
    )
    assert "`supportbot kb ingest PATH`" in record.message

    searched = run("kb", "search", "create an invoice")  # a clear failure, not empty results
    assert searched.exit_code == 1
    assert "qdrant-client's local mode" in searched.stderr
    assert "`supportbot kb ingest PATH`" in searched.stderr

    # Ingesting again moves it: the search then finds passages, and the old files stay.
    ingested = run("kb", "ingest", str(SAMPLE_KB))
    assert ingested.exit_code == 0, ingested.output
    found = run("kb", "search", "--json", "create an invoice")
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)
    assert (store / "meta.json").is_file()


def test_the_installed_command_names_a_local_mode_store_in_one_line(tmp_path: Path) -> None:
    store = local_mode_store(tmp_path / "store")
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("SUPPORTBOT_")
    }
    environment["SUPPORTBOT_KNOWLEDGE__QDRANT_PATH"] = str(store)
    finished = subprocess.run(
        [str(SUPPORTBOT), "kb", "stats"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert finished.returncode == 1, finished.stderr
    [line] = finished.stderr.strip().splitlines()  # not the logged copy as well
    assert line.startswith(f"error: {store.resolve()} holds a knowledge base in qdrant-client's")


def test_an_unknown_embedder(configure: pytest.MonkeyPatch) -> None:
    configure.setenv("SUPPORTBOT_KNOWLEDGE__EMBEDDER", "bert")
    line = one_line_error(run("kb", "ingest", str(SAMPLE_KB)), code=2)
    assert "unknown embedder 'bert'" in line


def test_an_invalid_setting_names_its_variable(configure: pytest.MonkeyPatch) -> None:
    configure.setenv("SUPPORTBOT_KNOWLEDGE__TOP_K", "many")
    line = one_line_error(run("kb", "stats"), code=2)
    assert line.startswith("error: invalid settings: SUPPORTBOT_KNOWLEDGE__TOP_K: ")


# ---------------------------------------------------------------- the sample, for `make run`


def test_the_sample_goes_into_the_default_collection(
    configure: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result = run("kb", "ingest-sample")
    assert result.exit_code == 0, result.output
    stats = json.loads(run("kb", "stats", "--json").stdout)
    assert stats["collection"] == "kb"
    assert stats["location"] == f"local:{tmp_path / 'home' / 'var' / 'qdrant'}"
    assert stats["documents"] == len(list(SAMPLE_KB.rglob("*.md")))


def test_the_sample_is_not_mixed_into_a_collection_of_ones_own(
    configure: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    configure.setenv("SUPPORTBOT_KNOWLEDGE__COLLECTION", "handbook")
    result = run("kb", "ingest-sample")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines() == [
        "sample knowledge base skipped: the configured collection is 'handbook' "
        "(SUPPORTBOT_KNOWLEDGE__COLLECTION), and the sample goes only into the default 'kb'"
    ]
    assert not (tmp_path / "home" / "var" / "qdrant").exists()


def test_a_sample_path_that_does_not_exist(configure: pytest.MonkeyPatch) -> None:
    configure.setenv("SUPPORTBOT_KNOWLEDGE__SAMPLE_PATH", "no-sample")
    line = one_line_error(run("kb", "ingest-sample"), code=2)
    assert line == f"error: no such file or folder: {Path(os.environ['SUPPORTBOT_HOME'])}/no-sample"


# ---------------------------------------------------------------- bench


def test_bench_defaults_stay_inside_the_repository() -> None:
    assert kb_support.DEV_SCENARIOS.is_relative_to(SOURCE_ROOT)
    assert all((kb_support.DEV_SCENARIOS / name).is_file() for name in bench.EVAL_FILES)


def test_bench_reads_the_manuals_from_home_by_default(
    configure: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    line = one_line_error(run("kb", "bench"), code=2)
    assert f"no manuals at {tmp_path / 'home' / 'var' / 'manuals'}: run `make eval-data`" in line
    assert "--kb-dir" in line


def test_bench_without_the_manuals(configure: pytest.MonkeyPatch, tmp_path: Path) -> None:
    line = one_line_error(run("kb", "bench", "--kb-dir", str(tmp_path / "manuals")), code=2)
    assert f"no manuals at {tmp_path / 'manuals'}" in line


def test_bench_given_a_file_for_the_manuals(configure: pytest.MonkeyPatch) -> None:
    page = next(SAMPLE_KB.rglob("*.md"))
    line = one_line_error(run("kb", "bench", "--kb-dir", str(page)), code=2)
    assert f"--kb-dir {page} is a file" in line


def test_bench_without_the_dev_conversations(configure: pytest.MonkeyPatch, tmp_path: Path) -> None:
    line = one_line_error(
        run("kb", "bench", "--kb-dir", str(SAMPLE_KB), "--evals-dir", str(tmp_path)), code=2
    )
    assert f"no dev conversations {', '.join(bench.EVAL_FILES)} in {tmp_path}" in line


def test_bench_with_nowhere_to_write_its_figures(
    configure: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    output = tmp_path / "missing" / "figures.json"
    line = one_line_error(
        run("kb", "bench", "--kb-dir", str(SAMPLE_KB), "--output", str(output)), code=2
    )
    assert line == f"error: no folder {output.parent} to write --output into"
