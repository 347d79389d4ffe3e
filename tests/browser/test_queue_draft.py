"""The drafted reply on a handoff card in Debian's Chromium, with the offline model: the
staff member sees the draft and its source, edits it and sends it as their own reply (the
handoff claimed on the way); the client's chat holds no draft before that. Screenshot:
queue-draft.png where `shots` says (tests/browser/test_widget.py)."""

import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.test_staff_pages import signed_in_page
from tests.browser.test_widget import TOKEN, browser, configured, serve, server, shots  # noqa: F401
from tests.handoff.test_queue_browser import KEY, client_says

pytestmark = pytest.mark.browser


def get(base: str, path: str) -> Any:
    request = urllib.request.Request(f"{base}{path}", headers={"authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def drafted(base: str) -> None:
    """Wait until the one handoff's draft is made (it follows the client's notice)."""
    for _ in range(500):
        (handoff,) = get(base, "/v1/handoffs")
        if handoff["draft"]["status"] != "drafting":
            return
        time.sleep(0.02)
    raise AssertionError("the draft was never made")


def test_staff_see_the_draft_edit_it_and_send_it_as_their_reply(
    server: str,  # noqa: F811
    browser: Browser,  # noqa: F811
    shots: Path,  # noqa: F811
) -> None:
    client_says(server, "How do I create an invoice?")
    assert "person from our support team" in client_says(server, "Can I talk to a human?")
    drafted(server)
    page, problems = signed_in_page(browser)
    page.goto(f"{server}/widget/static/queue.html")
    draft = page.get_by_role("region", name="Drafted reply")
    text = draft.get_by_label("Drafted reply, yours to edit")
    # the offline model's extractive answer, naming its page
    expect(text).to_have_value(re.compile("Creating and sending an invoice"))
    body = text.input_value()
    expect(draft.locator(".hq-draft-sources li")).to_have_text(
        ["Creating and sending an invoice (en/create-invoice.md)"]
    )
    # Nothing was added to the client's chat by drafting: the question, its answer, the
    # request for a person and the notice.
    before = get(server, f"/v1/conversations/{KEY}")["messages"]
    said = [m["role"] for m in before if m["role"] != "tool" and not m["tool_calls"]]
    assert said == ["user", "assistant", "user", "assistant"]

    edited = f"Hi Ann, Alice here. {body}"
    text.fill(edited)
    text.evaluate("area => { area.scrollTop = 0; }")  # the screenshot shows the edit
    page.screenshot(path=shots / "queue-draft.png", full_page=True)
    draft.get_by_role("button", name="Reply with draft").click()

    card = page.locator(".hq-card")
    expect(card.locator(".hq-status")).to_have_text("claimed by alice")
    staff_lines = card.locator('.hq-line[data-role="staff"]')
    expect(staff_lines).to_contain_text(["alice: Hi Ann, Alice here."])
    expect(page.get_by_role("region", name="Drafted reply")).to_have_count(0)
    messages = get(server, f"/v1/conversations/{KEY}")["messages"]
    assert (messages[-1]["role"], messages[-1]["author"]) == ("staff", "alice")
    assert messages[-1]["content"] == edited.strip()
    assert problems == []
