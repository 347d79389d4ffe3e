"""Page fetching guards, the search backends, and when `ask_expert` is offered."""

import httpx
import pytest
from pydantic import SecretStr

from app.agent.expert import ask_expert_tool
from app.agent.expert.fetch import FetchRefused, PageFetcher, check_url
from app.agent.expert.search import SearchResult, SearxngBackend, TavilyBackend, search_backend
from app.settings import ExpertSettings, Settings
from tests.expert.conftest import FakeWeb


def fetcher(allow_private: bool = True, max_bytes: int = 1_000_000) -> PageFetcher:
    return PageFetcher(5.0, max_bytes, allow_private)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/page",
        "http://localhost:9/page",
        "http://[::1]:9/page",
        "http://10.0.0.8/page",
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
        "http://[::ffff:192.168.1.1]/page",
    ],
)
async def test_private_and_loopback_addresses_are_refused(url: str) -> None:
    with pytest.raises(FetchRefused, match="non-public address"):
        await fetcher(allow_private=False).fetch(url)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "javascript:1"])
async def test_only_http_and_https_are_fetched(url: str) -> None:
    with pytest.raises(FetchRefused, match="only http and https"):
        await check_url(httpx.URL(url), allow_private_addresses=True)


async def test_a_page_is_extracted_without_its_boilerplate(web: FakeWeb) -> None:
    page = await fetcher().fetch(web.url("/gnucash-5-9"))

    assert page.title == "GnuCash 5.9 release notes"
    assert "GnuCash 5.9 was released on 29 September 2024." in page.text
    assert "Home | Download" not in page.text


async def test_redirects_are_followed_a_few_times(web: FakeWeb) -> None:
    web.redirects.update({"/moved": "/gnucash-5-9", "/loop": "/loop"})

    page = await fetcher().fetch(web.url("/moved"))

    assert page.title == "GnuCash 5.9 release notes"
    with pytest.raises(FetchRefused, match="redirects more than 3 times"):
        await fetcher().fetch(web.url("/loop"))
    assert web.requests.count("/loop") == 4


async def test_a_long_page_is_cut_at_the_size_cap(web: FakeWeb) -> None:
    web.pages["/long"] = "<html><body><p>" + "word " * 50_000 + "</p></body></html>"

    page = await fetcher(max_bytes=10_000).fetch(web.url("/long"))

    assert 0 < len(page.text) <= 10_000


async def test_missing_pages_and_other_media_are_refused(web: FakeWeb) -> None:
    with pytest.raises(FetchRefused, match="HTTP 404"):
        await fetcher().fetch(web.url("/nowhere"))
    with pytest.raises(FetchRefused, match="application/json, not a readable page"):
        await fetcher().fetch(web.url("/search?q=gnucash&format=json"))


async def test_tavily_backend_sends_the_key_and_reads_results(web: FakeWeb) -> None:
    backend = TavilyBackend("tvly-test", web.url("/tavily"), 5.0)

    results = await backend.search("GnuCash release", 1)

    assert web.tavily_auth == ["Bearer tvly-test"]
    sent = web.results("GnuCash release")[0]  # what the fake Tavily answered
    assert sent["content"].startswith("GnuCash 5.9 release notes Home")
    assert results == [
        SearchResult("GnuCash 5.9 release notes", web.url("/gnucash-5-9"), sent["content"])
    ]


def test_searxng_wins_then_tavily_then_none() -> None:
    key = SecretStr("tvly-test")
    assert search_backend(ExpertSettings()) is None
    assert isinstance(search_backend(ExpertSettings(tavily_api_key=key)), TavilyBackend)
    both = ExpertSettings(searxng_url="http://searxng:8080", tavily_api_key=key)
    assert isinstance(search_backend(both), SearxngBackend)


def test_ask_expert_is_offered_only_with_a_search_backend(
    settings: Settings, settings_with_expert: Settings
) -> None:
    """Embedded default: no backend, so the main model never sees the tool (the chat
    service tests assert its tools are exactly search_knowledge_base)."""
    assert ask_expert_tool(settings) is None
    offered = ask_expert_tool(settings_with_expert)
    assert offered is not None and offered.name == "ask_expert"
