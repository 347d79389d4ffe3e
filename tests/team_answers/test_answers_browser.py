"""In Debian's Chromium (Playwright) against the app on localhost: a staff reply in the
handoff queue saved as an answer in one click (the form prefilled with the customer's
question and the reply), then seen, edited and disabled on the answers page; the next
customer's reworded question is answered with it."""

import json
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from app.settings import Settings
from tests.browser.test_widget import browser, serving  # noqa: F401

pytestmark = pytest.mark.browser

TOKEN = "alice-answers-token"
QUESTION = "Can I pay my subscription with PayPal?"
REPLY = "Yes: open Settings → Billing → Payment method and choose PayPal."


@pytest.fixture
def server(settings: Settings, sample_index: Path, tmp_path: Path) -> Iterator[str]:
    settings.knowledge.qdrant_path = tmp_path / "own-qdrant"
    shutil.copytree(sample_index, settings.knowledge.qdrant_path)
    with serving(settings, TOKEN) as base:
        yield base


def call(base: str, method: str, path: str, body: dict | None = None, staff: bool = False) -> dict:
    headers = {"content-type": "application/json"}
    if staff:
        headers["authorization"] = f"Bearer {TOKEN}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{base}{path}", data, headers, method=method)
    with urllib.request.urlopen(request, timeout=60) as response:
        answer: dict = json.load(response)
        return answer


def client_says(base: str, key: str, text: str) -> dict:
    turn = {"audience": "client", "author": "Ann", "text": text}
    return call(base, "POST", f"/v1/conversations/{key}/messages", turn)


def test_a_staff_reply_saved_from_the_queue_answers_the_next_customer(
    server: str,
    browser: Browser,  # noqa: F811
    tmp_path: Path,
) -> None:
    client_says(server, "api:acme:1", QUESTION)
    client_says(server, "api:acme:1", "Can I talk to a human?")
    (handoff,) = call(server, "GET", "/v1/handoffs", staff=True)
    call(server, "POST", f"/v1/handoffs/{handoff['id']}/claim", {}, staff=True)
    call(server, "POST", f"/v1/handoffs/{handoff['id']}/messages", {"text": REPLY}, staff=True)

    page = browser.new_page(viewport={"width": 1000, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{server}/widget/static/queue.html")
    page.get_by_label("Staff token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    staff_line = page.locator('.hq-line[data-role="staff"]')
    expect(staff_line).to_have_count(1)
    errors.clear()  # the page's probe before the sign-in is answered 401
    expect(staff_line).to_have_text([f"alice: {REPLY}"])  # the button adds no text
    staff_line.get_by_role("button", name="Save as answer").click()

    form = page.get_by_role("dialog", name="Save as answer")
    expect(form.get_by_label("Question")).to_have_value(QUESTION)
    expect(form.get_by_label("Answer (Markdown)")).to_have_value(REPLY)
    form.get_by_label("Other wordings (one per line)").fill("Do you accept PayPal?\n\n")
    page.screenshot(path=tmp_path / "save-as-answer.png", full_page=True)
    form.get_by_role("button", name="Save answer").click()
    expect(page.locator(".an-saved")).to_contain_text("Saved as answer #1")

    page.get_by_role("link", name="All answers").click()
    card = page.locator(".an-card")
    expect(card).to_have_count(1)
    expect(card.locator("h2")).to_contain_text(QUESTION)
    expect(card.locator(".an-variants li")).to_have_text(["Do you accept PayPal?"])
    expect(card.locator(".an-answer")).to_have_text(REPLY)
    expect(card).to_contain_text("#1 by alice")
    page.screenshot(path=tmp_path / "answers-page.png", full_page=True)
    print(f"screenshots: {tmp_path}")

    reply = client_says(server, "api:acme:2", "Is PayPal accepted for the subscription?")
    assert "choose PayPal" in reply["text"]
    assert reply["citations"][0]["source"] == "answers/1"

    card.get_by_role("button", name="Edit").click()
    edit = page.get_by_role("dialog", name="Edit the answer")
    edit.get_by_label("Answer (Markdown)").fill(REPLY.replace("Payment method", "Wallets"))
    edit.get_by_role("button", name="Save answer").click()
    expect(card.locator(".an-answer")).to_contain_text("Billing → Wallets")
    card.get_by_role("button", name="Disable").click()
    expect(card.locator(".an-state")).to_have_text("disabled")
    reply = client_says(server, "api:acme:3", "Is PayPal accepted for the subscription?")
    assert not [c for c in reply["citations"] if c["source"].startswith("answers/")]
    assert errors == []
