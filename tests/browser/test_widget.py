"""The staff widget in a real browser: Debian's Chromium driven by Playwright against the
app served on localhost (SQLite, the sample knowledge base, the offline model)."""

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from playwright.sync_api import Browser, Page, expect, sync_playwright
from pydantic import SecretStr
from sqlalchemy import create_engine, select

from app.api.main import create_app
from app.db import migrate
from app.db.engine import sync_url
from app.db.models import Feedback
from app.settings import Settings

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
TOKEN = "alice-token"
# Keep Chromium off the network: this machine has none, and it would retry for ever.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def server(settings: Settings, sample_index: Path) -> Iterator[str]:
    settings.knowledge.qdrant_path = sample_index
    settings.widget.staff_tokens = {"alice": SecretStr(TOKEN)}
    migrate.upgrade(settings.db.url)
    port = free_port()
    uvicorn_server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=uvicorn_server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not uvicorn_server.started:
        assert time.monotonic() < deadline, "the app did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    uvicorn_server.should_exit = True
    thread.join(timeout=30)


@pytest.fixture
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


@pytest.fixture
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("widget-screenshots")
    print(f"screenshots: {folder}")
    return folder


def sign_in(page: Page, base: str) -> None:
    page.goto(f"{base}/widget")
    page.get_by_label("Staff token").fill("not-a-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("That token was not accepted.")
    page.get_by_label("Staff token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_label("Your question")).to_be_focused()


def test_ask_follow_a_citation_reload_and_rate(
    server: str, browser: Browser, shots: Path, settings: Settings
) -> None:
    page = browser.new_page(viewport={"width": 1000, "height": 800})
    sign_in(page, server)

    page.get_by_label("Your question").fill("How do I create an invoice?")
    page.keyboard.press("Enter")
    answer = page.locator(".sb-bot").last
    expect(answer.locator(".sb-feedback")).to_be_visible()  # the `done` event arrived
    expect(answer.locator(".sb-text")).to_contain_text("Sales → Invoices → New invoice")
    citation = answer.get_by_role("link", name="Creating and sending an invoice", exact=False)
    expect(citation.first).to_be_visible()
    citation.first.click()
    expect(answer.locator(".sb-passage").first).to_contain_text("(en/create-invoice.md)")
    page.screenshot(path=shots / "answer.png", full_page=True)

    page.reload()
    expect(page.locator(".sb-user")).to_have_text(["How do I create an invoice?"])
    restored = page.locator(".sb-bot").last
    expect(restored.locator(".sb-text")).to_contain_text("Sales → Invoices → New invoice")
    expect(
        restored.get_by_role("link", name="Creating and sending an invoice").first
    ).to_be_visible()
    restored.locator('button[data-rating="up"]').click()
    expect(restored.get_by_role("status")).to_have_text("Thanks for the feedback")
    page.screenshot(path=shots / "reloaded.png", full_page=True)

    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        stored = connection.execute(select(Feedback.rating, Feedback.author)).all()
    engine.dispose()
    assert stored == [("up", "alice")]

    page.get_by_role("button", name="New chat").click()
    expect(page.locator(".sb-msg")).to_have_count(0)


def test_requests_without_a_token_are_refused(server: str, browser: Browser) -> None:
    page = browser.new_page()
    page.goto(f"{server}/widget")
    expect(page.get_by_label("Staff token")).to_be_visible()  # not signed in: the form
    status = page.evaluate(
        """async (base) => (await fetch(base + "/v1/conversations/widget:x:1/messages/stream", {
            method: "POST", headers: {"content-type": "application/json"},
            body: JSON.stringify({audience: "staff", author: "x", text: "hi"})})).status""",
        server,
    )
    assert status == 403


def test_readable_on_a_phone(server: str, browser: Browser, shots: Path) -> None:
    page = browser.new_page(viewport={"width": 375, "height": 700}, is_mobile=True)
    sign_in(page, server)
    page.get_by_label("Your question").fill("Сколько строк можно загрузить из CSV-выписки?")
    page.get_by_role("button", name="Send").click()
    answer = page.locator(".sb-bot").last
    expect(answer.locator(".sb-feedback")).to_be_visible()
    box = answer.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375
    page.screenshot(path=shots / "phone.png", full_page=True)
