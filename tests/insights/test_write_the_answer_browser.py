"""Insights' "Write the answer" in Debian's Chromium (Playwright) against the app on
localhost: customers' questions the documentation has no answer to (real turns with the
offline model) make a knowledge-gap topic; its form opens prefilled with the topic's
questions, the saved answer is in /v1/answers, and the next customer asking on the topic
is answered with it."""

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from app.settings import Settings
from tests.browser.test_staff_pages import signed_in_page
from tests.browser.test_widget import TOKEN, serving

pytestmark = pytest.mark.browser

ASKED = ["Can I pay my subscription with PayPal?", "Is PayPal accepted for the subscription?"]
# Another gap: topics are cut where the questions' distances jump, so one needs a second.
ELSEWHERE = "Is there a mobile app for Android?"
LATER = "Can I pay for my subscription via PayPal?"
ANSWER = "Yes: open **Settings → Billing → Payment method** and choose PayPal."


@pytest.fixture
def server(settings: Settings, sample_index: Path, tmp_path: Path) -> Iterator[str]:
    settings.knowledge.qdrant_path = tmp_path / "own-qdrant"  # the answer is written into it
    shutil.copytree(sample_index, settings.knowledge.qdrant_path)
    with serving(settings) as base:
        yield base


def team_citations(reply: dict) -> list[dict]:
    return [c for c in reply["citations"] if c["source"].startswith("answers/")]


def test_write_the_answer_to_a_knowledge_gap(server: str, browser: Browser, tmp_path: Path) -> None:
    staff = {"authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server, timeout=120) as http:

        def ask(key: str, text: str) -> dict:
            turn = {"audience": "client", "author": "Ann", "text": text}
            reply = http.post(f"/v1/conversations/api:acme:{key}/messages", json=turn)
            assert reply.status_code == 200, reply.text
            body: dict = reply.json()
            return body

        for n, text in enumerate([*ASKED, ELSEWHERE]):
            reply = ask(f"asked-{n}", text)
            assert reply["outcome"] == "not_found" and not team_citations(reply)

        page, problems = signed_in_page(browser)  # errors and failed requests
        page.goto(f"{server}/widget/static/insights.html")
        topic = page.locator(".in-gap").filter(has_text=ASKED[0])
        expect(topic).to_have_count(1)
        shown = topic.locator(".in-transcript").locator("xpath=preceding-sibling::button")
        expect(shown).to_have_count(len(ASKED))
        questions = shown.all_inner_texts()  # the topic's, as Insights lists them
        assert sorted(questions) == sorted(ASKED)
        topic.get_by_role("button", name="Write the answer").click()

        form = page.get_by_role("dialog", name="Save as answer")
        question = form.get_by_label("Question")
        wordings = form.get_by_label("Other wordings (one per line)")
        # The topic's first question is the question, the others are its wordings.
        expect(question).to_have_value(questions[0])
        expect(wordings).to_have_value("\n".join(questions[1:]))
        form.get_by_label("Answer (Markdown)").fill(ANSWER)
        page.screenshot(path=tmp_path / "write-the-answer.png", full_page=True)
        form.get_by_role("button", name="Save answer").click()
        expect(topic.locator(".an-saved")).to_contain_text("Saved as answer #1")
        page.screenshot(path=tmp_path / "written.png", full_page=True)
        print(f"screenshots: {tmp_path}")

        (saved,) = http.get("/v1/answers", headers=staff).json()
        assert (saved["question"], saved["variants"]) == (questions[0], questions[1:])
        assert (saved["answer"], saved["author"]) == (ANSWER, "alice")

        reply = ask("after", LATER)
        assert "Settings → Billing → Payment method" in reply["text"], reply["text"]
        (cited,) = team_citations(reply)
        assert cited["source"] == "answers/1"
        assert cited["title"].startswith("Support team answer")
        assert problems == []
