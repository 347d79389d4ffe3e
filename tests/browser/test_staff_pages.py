"""The staff pages (the assistant, the handoff queue, Insights) with the offline model, in
Debian's Chromium: each loads with nothing in the browser's console but its own
messages (no failed request, no script error), they link to each other, and the queue's
card is filled from the transcript alone. Screenshots go where `shots` says
(tests/browser/test_widget.py)."""

from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect

from app.settings import Settings
from tests.browser.test_widget import TOKEN, browser, configured, serve, server, shots  # noqa: F401
from tests.handoff.test_queue_browser import client_says

pytestmark = pytest.mark.browser

PAGES = {
    "Chat": "/widget",
    "Handoffs": "/widget/static/queue.html",
    "Insights": "/widget/static/insights.html",
    "Answers": "/widget/static/answers.html",
}


def signed_in_page(browser: Browser) -> tuple[Page, list[str]]:  # noqa: F811
    """A page with alice's token stored as the sign-in form stores it, and the console's
    errors and failed requests as they come."""
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    page.add_init_script(f"localStorage.setItem('supportbot.token', '{TOKEN}')")
    problems: list[str] = []

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            problems.append(f"{message.text} ({message.location.get('url')})")

    page.on("console", console)
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on(
        "response",
        lambda response: (
            problems.append(f"{response.status} {response.url}") if response.status >= 400 else None
        ),
    )
    return page, problems


def test_each_staff_page_loads_without_console_errors_and_links_to_the_others(
    server: str,  # noqa: F811
    browser: Browser,  # noqa: F811
) -> None:
    client_says(server, "How do I create an invoice?")
    client_says(server, "Can I talk to a human?")
    page, problems = signed_in_page(browser)
    for name, path in PAGES.items():
        page.goto(f"{server}{path}")
        expect(page.get_by_text("Signed in as alice")).to_be_visible()
        page.wait_for_load_state("networkidle")
        assert problems == [], name
        others = page.get_by_role("navigation", name="Staff pages").get_by_role("link")
        expect(others).to_have_text([other for other in PAGES if other != name])
    # A new chat is not loaded from the server before its first question (it has none).
    page.goto(f"{server}/widget")
    page.get_by_role("button", name="New chat").click()
    page.reload()
    expect(page.get_by_text("Signed in as alice")).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert problems == []


def test_the_queue_card_is_filled_offline_and_its_transcript_reads_as_a_chat(
    server: str,  # noqa: F811
    browser: Browser,  # noqa: F811
    shots: Path,  # noqa: F811
    settings: Settings,
) -> None:
    client_says(server, "How do I create an invoice?")
    client_says(server, "How do I record a partial payment?")
    client_says(server, "Can I talk to a human?")
    page, problems = signed_in_page(browser)
    page.goto(f"{server}{PAGES['Handoffs']}")
    card = page.locator(".hq-card")
    expect(card).to_have_count(1)
    fields = dict(zip(card.locator("dt").all_inner_texts(), card.locator("dd").all(), strict=True))
    expect(fields["Who"]).to_have_text("Ann")
    expect(fields["Goal"]).to_contain_text("How do I create an invoice?")
    expect(fields["Asked and answered"].locator("li")).to_have_count(2)
    expect(fields["Pages cited"]).to_contain_text("Creating and sending an invoice")
    expect(fields["Open question"]).to_have_text("Ann: How do I record a partial payment? (#5)")

    # The latest messages shown are whole lines, none cut under the card's buttons; the
    # ones left out are counted.
    box = card.get_by_label("Latest messages")
    expect(box.locator(".hq-line").last).to_contain_text("person from our support team")
    top = box.evaluate("b => b.getBoundingClientRect().top + b.clientTop")
    tops = box.locator(".hq-line").evaluate_all("ls => ls.map(l => l.getBoundingClientRect().top)")
    assert min(tops) >= top, (tops, top)
    assert box.evaluate("b => b.scrollTop") == 0
    expect(box.locator(".hq-earlier")).to_have_text("2 earlier messages: see the whole transcript")
    page.screenshot(path=shots / "queue-card.png", full_page=True)

    card.get_by_role("button", name="Whole transcript").click()
    whole = card.get_by_label("Whole transcript")
    expect(whole.locator(".hq-line").first).to_have_text("Ann: How do I create an invoice?")
    expect(whole).not_to_contain_text('"role"')  # a chat, not the API's JSON
    expect(card.get_by_role("button", name="Latest messages")).to_be_visible()
    assert problems == []
