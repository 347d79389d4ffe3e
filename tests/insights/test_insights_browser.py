"""The staff widget's Insights page in Debian's Chromium (Playwright) against the app on
localhost, over seeded conversations: figures, the two charts, the gap report and a
question's transcript opened from it."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from app.settings import Settings
from tests.browser.test_widget import serving

from .seed import COMMENT, MOBILE_APP, Seeded, known_outcomes, seed

pytestmark = pytest.mark.browser

TOKEN = "alice-insights-token"


@pytest.fixture
def server(settings: Settings, sample_index: Path) -> Iterator[str]:
    settings.knowledge.qdrant_path = sample_index
    with serving(settings, TOKEN) as base:
        answered = [
            Seeded(
                f"api:acme:ok-{n}", "How do I create an invoice?", "answered", days_ago=n % 6 + 0.5
            )
            for n in range(14)
        ]
        seed(settings.db.url, known_outcomes() + answered)
        yield base


def test_the_insights_page_charts_outcomes_and_lists_the_gaps(
    server: str, browser: Browser, tmp_path: Path
) -> None:
    page = browser.new_page(viewport={"width": 1100, "height": 1000})
    page.goto(f"{server}/widget/static/insights.html")
    page.get_by_label("Staff token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()

    expect(page.locator("#in-resolution")).to_have_text("58%")  # 15 of 26 conversations
    expect(page.locator("#in-resolution-of")).to_contain_text("15 of 26 conversations")
    expect(page.locator("#in-handoffs-of")).to_have_text("asked 1")
    mix = page.get_by_role("img", name="Outcomes per day and resolution rate")
    expect(mix.locator("rect")).not_to_have_count(0)
    expect(mix.locator("circle")).not_to_have_count(0)
    cache = page.get_by_role("img", name="Prompt-cache hit rate per memory profile")
    expect(cache).to_contain_text("60%")

    gaps = page.locator(".in-gap")
    expect(gaps.first.locator(".in-count")).to_have_text("5")
    # A request for a person is a handoff, not a gap in the documentation.
    expect(gaps.filter(has_text="I want to talk to a real person")).to_have_count(0)
    expect(gaps.filter(has_text="number format").locator(".in-comment")).to_have_text(COMMENT)
    mobile = gaps.filter(has_text=MOBILE_APP[1])
    expect(mobile.locator(".in-count")).to_have_text("4")
    expect(mobile).to_contain_text("none: the documentation has no page on this")
    mobile.get_by_role("button", name=MOBILE_APP[1]).click()
    opened = mobile.locator(".in-transcript:not([hidden])")
    expect(opened.locator("p")).to_have_text([f"user: {MOBILE_APP[1]}", "bot: an answer"])
    expect(opened.get_by_role("link")).to_have_attribute(
        "href", "/v1/conversations/api:acme:mobile-1"
    )
    page.screenshot(path=tmp_path / "insights.png", full_page=True)
    print(f"screenshot: {tmp_path / 'insights.png'}")
