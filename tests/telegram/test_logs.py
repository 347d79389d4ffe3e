"""`supportbot telegram run` and `supportbot serve` (webhook mode) log with time and level,
and a token Telegram rejects (the fake Bot API answers 401) is never printed."""

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.db import migrate
from tests.telegram.fake_bot_api import FakeBotApi

REJECTED = "654321:REJECTED-abcdefghijklmnopqrstuvwxyz0123"
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|ERROR) [\w.]+: ")


async def run_cli(*args: str, env: dict[str, str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from app.cli import main; main()",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, output.decode()


REJECTED_LINE = "invalid settings: SUPPORTBOT_TELEGRAM__TOKEN: the Bot API rejected it"


@pytest.mark.parametrize(
    ("command", "mode", "last_words"),
    [
        (("telegram", "run"), "polling", f"error: {REJECTED_LINE}"),
        (
            ("serve", "--port", "0"),
            "webhook",
            f"ERROR app.api.starting: the service could not start: {REJECTED_LINE}",
        ),
    ],
)
async def test_a_rejected_token_is_never_printed_and_lines_have_time_and_level(
    bot_api: FakeBotApi, tmp_path: Path, command: tuple[str, ...], mode: str, last_words: str
) -> None:
    """Polling asks getMe before anything is logged: its one line is all there is."""
    db_url = f"sqlite:///{tmp_path / 'supportbot.db'}"
    migrate.upgrade(db_url)
    env = {name: value for name, value in os.environ.items() if not name.startswith("SUPPORTBOT_")}
    env |= {
        "SUPPORTBOT_DB__URL": db_url,
        "SUPPORTBOT_KNOWLEDGE__QDRANT_PATH": str(tmp_path / "qdrant"),
        "SUPPORTBOT_TELEGRAM__TOKEN": REJECTED,
        "SUPPORTBOT_TELEGRAM__MODE": mode,
        "SUPPORTBOT_TELEGRAM__WEBHOOK_SECRET": "webhook-secret",
        "SUPPORTBOT_TELEGRAM__API_BASE_URL": f"{bot_api.url}/bot",
        "SUPPORTBOT_TELEGRAM__FILE_BASE_URL": f"{bot_api.url}/file/bot",
    }
    code, output = await run_cli(*command, env=env)

    assert code == 2, output
    assert bot_api.calls[0][0] == "getMe", output  # the token was tried, and refused
    assert REJECTED not in output
    assert REJECTED.split(":")[1] not in output
    assert "Traceback" not in output
    lines = output.splitlines()
    records = [line for line in lines if LOG_LINE.match(line)]
    if mode == "polling":
        assert lines == [last_words]
    else:  # every line is a log record, the failed start-up's one line among them
        assert records == lines and any(line.endswith(last_words) for line in lines), output


@pytest.mark.parametrize("imported_first", [True, False])
def test_a_library_that_turns_its_own_debug_on_is_quiet_again(imported_first: bool) -> None:
    """bm25s sets its logger to DEBUG on import, before the logging set-up (the CLI) or
    after it (the server's app imported by uvicorn)."""
    imports = ["import knowledge.keywords", "configure_logging(Settings(_env_file=None))"]
    script = "; ".join(
        [
            "import logging",
            "from app.observability.logs import configure_logging",
            "from app.settings import Settings",
            *(imports if imported_first else imports[::-1]),
            "print(logging.getLogger('bm25s').isEnabledFor(logging.DEBUG))",
        ]
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False", run.stderr
