"""The staff pages' sign-in form (built by staff.js) in Debian's Chromium: the Insights
page refuses a wrong token, says so, and shows its report once the right one is typed."""

from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from app.settings import Settings
from tests.browser.test_widget import browser, configured, serving, shots

__all__ = ["browser", "configured", "shots"]  # the fixtures this module uses from test_widget.py

pytestmark = pytest.mark.browser

TOKEN = "carol-insights-token"


def test_the_insights_page_signs_in_with_the_staff_form(
    configured: Settings, browser: Browser, shots: Path
) -> None:
    with serving(configured, TOKEN) as base:
        page = browser.new_page(viewport={"width": 1000, "height": 800})
        page.goto(f"{base}/widget/static/insights.html")
        token = page.get_by_label("Staff token")
        expect(token).to_be_focused()
        expect(token).to_have_attribute("type", "password")

        token.fill("not-a-token")
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#sb-login-error")).to_have_text("That token was not accepted.")
        expect(page.locator("#in-body")).to_be_hidden()

        token.fill(TOKEN)
        page.get_by_role("button", name="Sign in").click()
        expect(token).to_be_hidden()
        expect(page.locator("#in-body")).to_be_visible()
        # No conversation yet: the report says so rather than showing empty figures.
        expect(page.locator("#in-gaps-summary")).to_contain_text("Every question in this period")
        page.screenshot(path=str(shots / "insights-signed-in.png"))
