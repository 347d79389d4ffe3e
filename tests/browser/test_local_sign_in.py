"""`supportbot serve` as `make run` starts it (loopback, no staff credentials): the sign-in
link it prints opens the widget signed in, in Debian's Chromium; a link of an earlier start
does not. Screenshots as in test_widget.py ($WIDGET_SCREENSHOTS)."""

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from playwright.sync_api import Browser, expect

from app.db import migrate
from tests.browser.test_widget import DESKTOP, browser, free_port, shots

__all__ = ["browser", "shots"]  # the fixtures this module uses from test_widget.py

pytestmark = pytest.mark.browser

T = TypeVar("T")
LINK = re.compile(r"http://127\.0\.0\.1:\d+/widget#sign-in=[\w-]+")


def _wait_for(what: str, found: Callable[[], T | None], seconds: float = 90) -> T:
    deadline = time.monotonic() + seconds
    while not (value := found()):
        assert time.monotonic() < deadline, f"no {what} after {seconds} s"
        time.sleep(0.2)
    return value


@pytest.fixture
def served(tmp_path: Path, sample_index: Path) -> Iterator[str]:
    """`supportbot serve` on a free port, with nothing configured but where its files are
    (no .env: it runs in an empty folder); the link it printed."""
    store = tmp_path / "qdrant"
    shutil.copytree(sample_index, store, ignore=shutil.ignore_patterns(".lock"))
    database = f"sqlite:///{tmp_path / 'supportbot.db'}"
    migrate.upgrade(database)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SUPPORTBOT_")}
    environment |= {
        "SUPPORTBOT_HOME": str(tmp_path),
        "SUPPORTBOT_DB__URL": database,
        "SUPPORTBOT_KNOWLEDGE__QDRANT_PATH": str(store),
    }
    port = free_port()
    output = tmp_path / "serve.log"
    with output.open("w") as log:
        server = subprocess.Popen(
            [Path(sys.executable).with_name("supportbot"), "serve", "--port", str(port)],
            cwd=tmp_path,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        match = _wait_for("sign-in link", lambda: LINK.search(output.read_text()))
        _wait_for("answer from /healthz", lambda: _healthy(port))
        yield match.group(0)
    finally:
        server.terminate()
        server.wait(timeout=30)


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def test_the_printed_link_signs_in_as_a_local_staff_member(
    served: str, browser: Browser, shots: Path
) -> None:
    page = browser.new_page(viewport=DESKTOP)
    page.goto(served)
    expect(page.get_by_text("Signed in as local")).to_be_visible()
    expect(page.get_by_label("Your question")).to_be_visible()
    expect(page.locator(".sb-welcome")).to_contain_text("Hello, local!")
    assert "#" not in page.url  # the token left the address bar
    page.screenshot(path=shots / "local-sign-in.png")

    page.reload()  # kept like a typed-in token
    expect(page.get_by_text("Signed in as local")).to_be_visible()

    earlier = served.rsplit("=", 1)[0] + "=a-link-of-an-earlier-start"
    other = browser.new_page(viewport=DESKTOP)
    other.goto(earlier)
    expect(other.get_by_role("alert")).to_contain_text("from an earlier start of the server")
    expect(other.get_by_label("Staff token")).to_be_visible()
    other.screenshot(path=shots / "local-sign-in-expired.png")
