"""The handoff queue page in Debian's Chromium (Playwright) against the app on localhost:
a client conversation asks for a person; the staff member sees its card, claims it,
replies and resolves it."""

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from app.settings import Settings
from tests.browser.test_widget import CHROMIUM, CHROMIUM_ARGS, serving

pytestmark = pytest.mark.browser

TOKEN = "alice-queue-token"
KEY = "api:acme:7"
CONSTRAINT = "We are a GmbH in Germany and must invoice in EUR."


@pytest.fixture
def server(settings: Settings, sample_index: Path) -> Iterator[str]:
    settings.knowledge.qdrant_path = sample_index
    with serving(settings, TOKEN) as base:
        yield base


@pytest.fixture
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


def client_says(base: str, text: str) -> str:
    """A client's turn over the API (anonymous: no API keys are set)."""
    body = json.dumps({"audience": "client", "author": "Ann", "text": text}).encode()
    request = urllib.request.Request(
        f"{base}/v1/conversations/{KEY}/messages",
        body,
        {"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return str(json.load(response)["text"])


def test_the_queue_shows_the_card_and_staff_claim_reply_and_resolve(
    server: str, browser: Browser, tmp_path: Path
) -> None:
    client_says(server, "How do I create an invoice?")
    client_says(server, CONSTRAINT)
    assert "person from our support team" in client_says(server, "Can I talk to a human?")

    page = browser.new_page(viewport={"width": 1000, "height": 900})
    page.goto(f"{server}/widget/static/queue.html")
    page.get_by_label("Staff token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    card = page.locator(".hq-card")
    expect(card).to_have_count(1)
    expect(card.locator("h2")).to_contain_text(KEY)
    expect(card).to_contain_text(CONSTRAINT)
    expect(card.locator("dd").nth(6)).to_have_text(
        "Creating and sending an invoice (en/create-invoice.md)"
    )
    page.screenshot(path=tmp_path / "queue-open.png", full_page=True)

    card.get_by_role("button", name="Claim").click()
    expect(card.locator(".hq-status")).to_have_text("claimed by alice")
    card.get_by_label("Reply to the client").fill("Hi Ann, Alice here: set the EUR rates first.")
    card.get_by_role("button", name="Send").click()
    expect(card.locator('.hq-line[data-role="staff"]')).to_have_text(
        ["alice: Hi Ann, Alice here: set the EUR rates first."]
    )
    page.screenshot(path=tmp_path / "queue-claimed.png", full_page=True)
    print(f"screenshots: {tmp_path}")

    card.get_by_role("button", name="Resolve").click()
    expect(page.locator("#hq-list")).to_have_text("Nobody is waiting for a person.")
    assert "Record payment" in client_says(server, "How do I record a payment?")
