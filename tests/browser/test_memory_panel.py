"""The Memory panel of the handoff queue's cards in Debian's Chromium: a backend's
conversation with two remembered people asks for a person; the staff member sees each
person's items with their source, follows one to its message, deletes another.

The screenshot is docs/memory-widget.png: `WIDGET_SCREENSHOTS=docs .venv/bin/pytest
tests/browser/test_memory_panel.py` makes it again (elsewhere it goes where test_widget.py
puts its screenshots)."""

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect
from pydantic import SecretStr

from app.settings import ApiKey, Settings
from tests.browser.test_widget import browser, configured, serving, shots

__all__ = ["browser", "configured", "shots"]  # the fixtures this module uses from test_widget.py

pytestmark = pytest.mark.browser

TOKEN = "alice-memory-token"
KEY = "acme-key-0123456789abcdef"
CHAT = "api:acme:7"


def call(base: str, method: str, path: str, token: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        base + path,
        json.dumps(body).encode() if body is not None else None,
        {"content-type": "application/json", "authorization": f"Bearer {token}"},
        method=method,
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def says(base: str, key: str, author: str, person: str, text: str) -> str:
    body = {"audience": "client", "author": author, "person": person, "text": text}
    return str(call(base, "POST", f"/v1/conversations/{key}/messages", KEY, body)["text"])


def test_staff_see_the_people_s_memory_follow_a_source_and_delete_an_item(
    configured: Settings, browser: Browser, shots: Path
) -> None:
    configured.api.keys = {"acme": ApiKey(key=SecretStr(KEY), prefix="api:acme:")}
    with serving(configured, TOKEN) as base:
        says(base, "api:acme:6", "Ann", "u-1", "Remember that I prefer short answers")
        says(base, CHAT, "Ann", "u-1", "Remember that our currency is CHF")
        says(base, CHAT, "Bob", "u-2", "Remember that we use GnuCash 5 on Windows")
        says(base, CHAT, "Ann", "u-1", "How do I create an invoice?")
        assert "person from our support team" in says(
            base, CHAT, "Ann", "u-1", "Can I talk to a human?"
        )

        page = browser.new_page(viewport={"width": 1000, "height": 1100})
        page.goto(f"{base}/widget/static/queue.html")
        page.get_by_label("Staff token").fill(TOKEN)
        page.get_by_role("button", name="Sign in").click()
        panel = page.get_by_role("region", name=f"Memory of the people in {CHAT}")
        # Styled from a file: the page's content security policy refuses inline styles.
        expect(page.locator(".hq-transcript")).to_have_css("overflow-y", "auto")
        people = panel.locator(".hq-person")
        expect(people.locator(".hq-who")).to_have_text(["Ann", "Bob"])
        expect(people.locator(".hq-scope")).to_have_text(["api|api:acme:|u-1", "api|api:acme:|u-2"])
        ann, bob = people.nth(0), people.nth(1)
        expect(ann.locator(".hq-item-text")).to_have_text(
            ["I prefer short answers", "our currency is CHF"]
        )
        expect(bob.locator(".hq-item-text")).to_have_text(["we use GnuCash 5 on Windows"])
        expect(ann.locator(".hq-item-meta").first).to_contain_text("in api:acme:6")
        expect(ann.locator(".hq-item-meta").first.get_by_role("link")).to_have_attribute(
            "href", "/v1/conversations/api%3Aacme%3A6"
        )

        # What the model was told of these people, once, before the first turn that sent it.
        told = page.locator(".hq-told")
        expect(told).to_have_count(1)
        told.get_by_text("Memory sent to the model").click()
        expect(told.locator("pre")).to_contain_text("I prefer short answers")
        told.get_by_text("Memory sent to the model").click()

        # The source of an item of this chat is its message in the card's transcript.
        ann.locator(".hq-item").nth(1).get_by_role("link", name="in this chat").click()
        source = page.locator(".hq-line-source")
        expect(source).to_have_text("Ann: Remember that our currency is CHF")
        expect(source).to_be_focused()

        windows = bob.locator(".hq-item")
        windows.get_by_role("button", name="Delete “we use GnuCash 5 on Windows”").click()
        expect(windows.get_by_text("Forget this for good?")).to_be_visible()
        page.locator(".hq-card").screenshot(path=shots / "memory-widget.png")
        windows.get_by_role("button", name="Yes, delete").click()
        expect(bob.locator(".hq-item")).to_have_count(0)
        expect(bob).to_contain_text("Nothing remembered.")
        expect(ann.locator(".hq-item")).to_have_count(2)

        memory = call(base, "GET", f"/v1/conversations/{CHAT}/memory", TOKEN)
        assert [(p["who"], [i["text"] for i in p["items"]]) for p in memory["people"]] == [
            ("Ann", ["I prefer short answers", "our currency is CHF"]),
            ("Bob", []),
        ]
        page.reload()  # what the page shows after a reload, too
        expect(page.locator(".hq-person").nth(1)).to_contain_text("Nothing remembered.")
