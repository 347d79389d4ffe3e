"""A newcomer's walk through the README, as processes: what `make run` runs (`db upgrade`,
`kb ingest-sample`, `serve`), the README's curl calls, a request for a person and a
"remember that …" without a `person` over HTTP, then their own folder ingested and a bad
database URL. No step prints a traceback, and every reply says what happened."""

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.browser.test_widget import free_port

SUPPORTBOT = [sys.executable, "-c", "from app.cli import main; main()"]


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """A fresh install's environment: its own home for the database and the store."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("SUPPORTBOT_")},
        "SUPPORTBOT_HOME": str(tmp_path),
    }


def run(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [*SUPPORTBOT, *arguments], env=env, capture_output=True, text=True, timeout=600
    )
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


@pytest.fixture
def served(home: dict[str, str]) -> Iterator[str]:
    assert run(home, "db", "upgrade").returncode == 0
    assert run(home, "kb", "ingest-sample").returncode == 0
    port = free_port()
    server = subprocess.Popen(
        [*SUPPORTBOT, "serve", "--port", str(port)],
        env=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=60)
        assert "Traceback" not in output, output


def test_the_readme_walk_says_what_happened_at_every_step(
    served: str, home: dict[str, str], tmp_path: Path
) -> None:
    def ask(key: str, text: str, **extra: str) -> dict[str, object]:
        body = {"audience": "client", "author": "Ann", "text": text, **extra}
        response = httpx.post(f"{served}/v1/conversations/{key}/messages", json=body, timeout=60)
        assert response.status_code == 200, response.text
        reply: dict[str, object] = response.json()
        return reply

    answered = ask("demo", "How do I send an invoice?")
    assert answered["outcome"] in ("answered", "not_found") and answered["text"]
    assert httpx.get(f"{served}/v1/conversations/demo").json()["messages"]

    handed = ask("person", "Can I talk to a human, please?")
    assert (handed["outcome"], handed["handoff"]) == ("handed_off", "open")
    assert handed["text"] and "/ask" not in str(handed["text"])

    noted = ask("memory", "remember that I use the Android app")
    assert "this conversation only" in str(noted["text"])

    unrelated = ask("weather", "What will the weather be in Lisbon tomorrow?")
    assert unrelated["outcome"] == "not_found"

    folder = tmp_path / "helpcenter"
    folder.mkdir()
    (folder / "refunds.md").write_text("# Refunds\n\nWe refund unused months.\n", "utf-8")
    refused = run(home, "kb", "ingest", str(folder))  # the server holds the local store
    assert refused.returncode != 0 and len(refused.stderr.strip().splitlines()) == 1


def test_a_bad_database_url_is_one_line_naming_the_variable(home: dict[str, str]) -> None:
    result = run({**home, "SUPPORTBOT_DB__URL": "nonsense"}, "db", "upgrade")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "SUPPORTBOT_DB__URL" in line
