"""The staff widget in a real browser: Debian's Chromium driven by Playwright against the
app served on localhost (SQLite, the sample knowledge base; the offline model, or the
scripted OpenAI-compatible server where an answer must be hostile or a turn fail).

Screenshots go to a temporary folder, or to $WIDGET_SCREENSHOTS when set (to look at them:
`WIDGET_SCREENSHOTS=var/screenshots .venv/bin/pytest tests/browser`)."""

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from ipaddress import ip_network
from pathlib import Path

import pytest
import uvicorn
from playwright.sync_api import (
    Browser,
    Dialog,
    Locator,
    Page,
    ViewportSize,
    expect,
    sync_playwright,
)
from pydantic import SecretStr
from sqlalchemy import create_engine, select

from app.api.main import create_app
from app.bench.scripted_llm import Fault, Reply, ScriptedLLM
from app.db import migrate
from app.db.engine import sync_url
from app.db.models import Feedback
from app.settings import ApiKey, LLMSettings, Settings

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
DESKTOP = ViewportSize(width=1280, height=800)
PHONE = ViewportSize(width=390, height=844)
QUESTION = "How do I create an invoice?"
# What a prompt-injected page could make a model write: each would run or load something
# if the page inserted the answer as HTML unsanitized.
HOSTILE = (
    "**Step 1.** Open *Sales → Invoices*.\n\n"
    "- first item\n- second item\n\n"
    "```\ninvoice --send <customer>\n```\n\n"
    "<script>window.hacked = 'script'; alert('script')</script>\n"
    "<img src=\"x\" onerror=\"window.hacked = 'img'; alert('img')\">\n\n"
    "[Click me](javascript:window.hacked='link') or read [the manual](https://docs.example.com/invoices)."
    " ![tracker](https://evil.example/pixel.png)"
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serving(settings: Settings, token: str = TOKEN) -> Iterator[str]:
    """The app on a free localhost port, with alice's staff token; its base URL."""
    settings.widget.staff_tokens = {"alice": SecretStr(token)}
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
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        uvicorn_server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture
def configured(settings: Settings, sample_index: Path) -> Settings:
    """The test's settings over the sample knowledge base; change them, then `serve`."""
    settings.knowledge.qdrant_path = sample_index
    return settings


@pytest.fixture
def serve(configured: Settings) -> Iterator[Callable[[], str]]:
    with contextlib.ExitStack() as stack:
        yield lambda: stack.enter_context(serving(configured))


@pytest.fixture
def server(serve: Callable[[], str]) -> str:
    return serve()


def use_scripted(settings: Settings, model: ScriptedLLM) -> None:
    settings.llm = LLMSettings(
        model="scripted", base_url=model.base_url, api_key="dummy", max_retries=0
    )


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
    chosen = os.environ.get("WIDGET_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("widget-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"screenshots: {folder}")
    return folder


def no_dialogs(page: Page) -> list[str]:
    """Every alert/prompt the page opens (each one is dismissed); the widget opens none."""
    opened: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        opened.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", dismiss)
    return opened


def sign_in(page: Page, base: str) -> None:
    page.goto(f"{base}/widget")
    page.get_by_label("Staff token").fill("not-a-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("That token was not accepted.")
    page.get_by_label("Staff token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_label("Your question")).to_be_focused()


def ask(page: Page, text: str) -> None:
    page.get_by_label("Your question").fill(text)
    page.keyboard.press("Enter")


def last_answer(page: Page) -> Locator:
    answer = page.locator(".sb-bot").last
    expect(answer.locator(".sb-feedback")).to_be_visible()  # the `done` event arrived
    return answer


def test_ask_open_a_passage_rate_with_a_comment_and_see_it_after_a_reload(
    server: str, browser: Browser, shots: Path, settings: Settings
) -> None:
    page = browser.new_page(viewport=DESKTOP)
    dialogs = no_dialogs(page)
    sign_in(page, server)
    expect(page.get_by_text("Signed in as alice")).to_be_visible()
    welcome = page.locator(".sb-welcome")
    expect(welcome).to_contain_text("Hello, alice!")
    page.screenshot(path=shots / "desktop-welcome.png")

    ask(page, QUESTION)
    answer = last_answer(page)
    expect(welcome).to_have_count(0)
    expect(answer.locator(".sb-text")).to_contain_text("Sales → Invoices → New invoice")
    expect(answer.locator(".sb-text ol li").first).to_be_visible()  # steps as a real list
    # No public page configured: the citation opens its passage in place.
    citation = answer.get_by_role("button", name="Creating and sending an invoice").first
    citation.click()
    passage = answer.locator(".sb-passage").first
    expect(passage).to_contain_text("en/create-invoice.md")
    expect(passage.locator("strong").first).to_have_text("Sales → Invoices → New invoice")
    expect(answer.locator(".sb-sources")).to_have_count(1)  # one list of sources

    answer.get_by_role("button", name="Not helpful").click()
    comment = answer.get_by_label("What was wrong? (optional)")
    expect(comment).to_be_focused()
    comment.fill("The due date is missing")
    page.screenshot(path=shots / "desktop-answer-comment.png")
    answer.get_by_role("button", name="Send feedback").click()
    expect(answer.get_by_role("status")).to_have_text("Thanks for the feedback")
    expect(comment).to_be_hidden()

    page.reload()
    expect(page.locator(".sb-user")).to_have_text([QUESTION])
    restored = page.locator(".sb-bot").last
    expect(restored.locator(".sb-text")).to_contain_text("Sales → Invoices → New invoice")
    expect(restored.locator('button[data-rating="down"]')).to_have_attribute("aria-pressed", "true")
    expect(restored.locator('button[data-rating="up"]')).to_have_attribute("aria-pressed", "false")
    expect(restored.get_by_role("status")).to_have_text("You found this not helpful")
    page.screenshot(path=shots / "desktop-reloaded.png")

    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        stored = connection.execute(select(Feedback.rating, Feedback.author, Feedback.comment))
        rows = stored.all()
    engine.dispose()
    assert rows == [("down", "alice", "The due date is missing")]
    assert dialogs == []  # no window.prompt for the comment


def test_markdown_is_rendered_and_nothing_in_an_answer_runs(
    configured: Settings, serve: Callable[[], str], browser: Browser, shots: Path
) -> None:
    model = ScriptedLLM(policy=lambda _: Reply(HOSTILE))
    with model:
        use_scripted(configured, model)
        base = serve()
        page = browser.new_page(viewport=DESKTOP)
        dialogs = no_dialogs(page)
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        sign_in(page, base)
        ask(page, "How do I send an invoice?")
        answer = last_answer(page)
        text = answer.locator(".sb-text")
        expect(text.locator("strong")).to_have_text("Step 1.")
        expect(text.locator("em")).to_have_text("Sales → Invoices")
        expect(text.locator("ul li")).to_have_text(["first item", "second item"])
        expect(text.locator("pre code")).to_have_text("invoice --send <customer>")
        manual = text.get_by_role("link", name="the manual")
        expect(manual).to_have_attribute("href", "https://docs.example.com/invoices")
        expect(manual).to_have_attribute("target", "_blank")
        tracker = text.get_by_role("link", name="tracker")  # an image, shown as a link
        expect(tracker).to_have_attribute("href", "https://evil.example/pixel.png")
        # The hostile parts are shown as the text they are, never as elements.
        expect(text).to_contain_text("<script>window.hacked = 'script'")
        expect(text).to_contain_text("[Click me](javascript:window.hacked='link')")
        assert text.locator("script, img, [onerror]").count() == 0
        assert text.locator('a[href^="javascript"]').count() == 0
        page.screenshot(path=shots / "desktop-hostile-answer.png", full_page=True)

        page.reload()  # the history's rendering, too
        expect(page.locator(".sb-bot .sb-text strong")).to_have_text("Step 1.")
        assert page.evaluate("typeof window.hacked") == "undefined"
        assert dialogs == []
        assert not [url for url in requested if "evil.example" in url]


def test_citations_link_to_the_public_documentation_page(
    configured: Settings, serve: Callable[[], str], browser: Browser
) -> None:
    configured.knowledge.public_base_urls = {"kb": "https://help.example.com/docs/"}
    page = browser.new_page(viewport=DESKTOP)
    sign_in(page, serve())
    ask(page, QUESTION)
    answer = last_answer(page)
    link = answer.locator(".sb-citations").get_by_role(
        "link", name="Creating and sending an invoice"
    )
    expect(link.first).to_have_attribute(
        "href", "https://help.example.com/docs/en/create-invoice.md"
    )
    expect(link.first).to_have_attribute("target", "_blank")
    expect(answer.locator(".sb-passage")).to_have_count(0)  # a page, not the excerpt


def test_sign_out_forgets_the_token(server: str, browser: Browser) -> None:
    page = browser.new_page(viewport=DESKTOP)
    sign_in(page, server)
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("Staff token")).to_be_focused()
    expect(page.get_by_label("Your question")).to_be_hidden()
    assert page.evaluate("localStorage.getItem('supportbot.token')") is None
    page.reload()
    expect(page.get_by_label("Staff token")).to_be_visible()  # still signed out


def test_behind_the_sso_proxy_there_is_nothing_to_sign_out_of(
    configured: Settings, serve: Callable[[], str], browser: Browser
) -> None:
    configured.widget.trusted_user_header = "X-Forwarded-User"
    configured.widget.trusted_proxies = [ip_network("127.0.0.1/32")]  # the browser is the proxy
    # An open API is refused behind a proxy.
    configured.api.keys = {"shop": ApiKey(key=SecretStr("shop-key-0123456789abcdef"))}
    page = browser.new_page(viewport=DESKTOP)
    page.set_extra_http_headers({"X-Forwarded-User": "bob"})  # what the proxy adds
    page.goto(f"{serve()}/widget")
    expect(page.get_by_text("Signed in as bob")).to_be_visible()
    expect(page.get_by_label("Your question")).to_be_focused()
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
    expect(page.get_by_label("Staff token")).to_be_hidden()


def test_new_chat_keeps_the_old_one_in_the_list_of_chats(
    server: str, browser: Browser, shots: Path
) -> None:
    page = browser.new_page(viewport=DESKTOP)
    sign_in(page, server)
    ask(page, QUESTION)
    last_answer(page)
    page.get_by_role("button", name="New chat").click()
    expect(page.locator(".sb-msg")).to_have_count(0)
    example = page.locator(".sb-welcome").get_by_role("button", name="record a partial payment")
    example.click()  # an example question is asked as it is
    expect(page.locator(".sb-user")).to_have_text(["How do I record a partial payment?"])
    last_answer(page)

    page.get_by_role("button", name="Chats").click()
    chats = page.get_by_role("navigation", name="Your chats").get_by_role("button")
    expect(chats).to_have_count(2)
    expect(chats.first).to_contain_text("How do I record a partial payment?")  # the latest
    expect(chats.first).to_have_attribute("aria-current", "true")
    expect(chats.nth(1)).to_contain_text(QUESTION)
    page.screenshot(path=shots / "desktop-chats.png")
    chats.nth(1).click()
    expect(page.locator(".sb-user")).to_have_text([QUESTION])
    expect(page.get_by_label("Your question")).to_be_focused()


def test_a_refused_question_is_shown_and_given_back(
    configured: Settings, serve: Callable[[], str], browser: Browser, shots: Path
) -> None:
    configured.chat.max_message_chars = 40
    page = browser.new_page(viewport=PHONE, is_mobile=True)
    sign_in(page, serve())
    too_long = "How do I create an invoice for a customer abroad?"
    ask(page, too_long)
    failed = page.locator(".sb-bot.sb-failed")
    expect(failed).to_have_text(
        f"Not sent: the message has {len(too_long)} characters; the limit is 40"
    )
    expect(failed).to_be_in_viewport(ratio=1)
    expect(page.get_by_label("Your question")).to_have_value(too_long)
    page.screenshot(path=shots / "phone-refused.png")


def test_a_turn_that_fails_mid_stream_is_shown(
    configured: Settings, serve: Callable[[], str], browser: Browser
) -> None:
    model = ScriptedLLM(fault_rate=1.0, fault_kinds=[Fault.SERVER_ERROR])
    with model:
        use_scripted(configured, model)
        page = browser.new_page(viewport=DESKTOP)
        sign_in(page, serve())
        ask(page, QUESTION)
        failed = page.locator(".sb-bot.sb-failed")
        expect(failed).to_contain_text("Sorry, no answer this time:")
        expect(failed).to_contain_text("your message was kept")
        expect(failed).to_be_in_viewport(ratio=1)


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
    page = browser.new_page(viewport=PHONE, is_mobile=True)
    sign_in(page, server)
    page.screenshot(path=shots / "phone-welcome.png")
    page.get_by_label("Your question").fill("Сколько строк можно загрузить из CSV-выписки?")
    page.get_by_role("button", name="Send").click()
    answer = last_answer(page)
    for element in (answer, page.get_by_role("button", name="New chat")):
        box = element.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    page.screenshot(path=shots / "phone-answer.png", full_page=True)
    page.get_by_role("button", name="Chats").click()
    expect(page.get_by_role("navigation", name="Your chats").get_by_role("button")).to_have_count(1)
    page.screenshot(path=shots / "phone-chats.png")


def test_the_embed_script_opens_the_widget_in_a_side_panel(
    configured: Settings, serve: Callable[[], str], browser: Browser
) -> None:
    configured.widget.frame_ancestors = ["http://127.0.0.1:*"]  # the page below embeds it
    server = serve()
    page = browser.new_page(viewport=DESKTOP)
    page.goto(f"{server}/widget")
    page.evaluate("token => localStorage.setItem('supportbot.token', token)", TOKEN)
    page.set_content(f'<h1>CRM</h1><script src="{server}/widget/embed.js"></script>')
    launcher = page.get_by_role("button", name="Support assistant")
    launcher.click()
    panel = page.frame_locator("iframe[title='Support assistant']")
    expect(panel.get_by_text("Signed in as alice")).to_be_visible()
    expect(panel.locator(".sb-welcome")).to_be_visible()
    launcher.click()
    expect(page.locator("iframe")).to_be_hidden()
    expect(launcher).to_have_attribute("aria-expanded", "false")
