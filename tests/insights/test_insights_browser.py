"""The staff widget's Insights page in Debian's Chromium (Playwright) against the app on
localhost, over seeded conversations: figures, the two charts, the gap report and a
question's transcript opened from it."""

from collections.abc import Iterator
from pathlib import Path

import httpx
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


def test_a_thumbs_down_and_a_rephrased_question_show_as_unanswered(
    settings: Settings, sample_index: Path, browser: Browser, tmp_path: Path
) -> None:
    """Real turns with the offline model: an answer rated 👎 and one the asker asked again
    in other words are out of the resolution rate and in the gap report, each saying why."""
    settings.knowledge.qdrant_path = sample_index
    staff = {"authorization": f"Bearer {TOKEN}"}
    with serving(settings, TOKEN) as base, httpx.Client(base_url=base, headers=staff) as http:

        def ask(key: str, text: str) -> None:
            body = {"audience": "staff", "author": "alice", "text": text}
            reply = http.post(f"/v1/conversations/{key}/messages", json=body, timeout=120)
            assert reply.status_code == 200, reply.text

        ask("widget:alice:rated", "How do I create an invoice?")
        rated = http.post(
            "/v1/conversations/widget:alice:rated/turns/1/feedback",
            json={"rating": "down", "comment": "It does not say how to add my logo."},
        )
        assert rated.status_code == 201, rated.text
        ask("widget:alice:again", "How do I record a partial payment?")
        ask("widget:alice:again", "ok but how do I enter a payment that covers only part of it?")
        ask("widget:alice:thanks", "How do I create an invoice?")
        ask("widget:alice:thanks", "Thanks, that worked!")

        page = browser.new_page(viewport={"width": 1100, "height": 1000})
        page.goto(f"{base}/widget/static/insights.html")
        page.get_by_label("Staff token").fill(TOKEN)
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#in-resolution-of")).to_contain_text("1 of 3 conversations")
        gaps = page.locator(".in-gap")
        expect(gaps.filter(has_text="partial payment")).to_contain_text("unresolved: asked again")
        expect(gaps.filter(has_text="create an invoice")).to_contain_text("rated down")
        expect(gaps.filter(has_text="create an invoice")).to_contain_text("simulated")
        page.screenshot(path=tmp_path / "insights-unresolved.png", full_page=True)
        print(f"screenshot: {tmp_path / 'insights-unresolved.png'}")
