"""Page fetching guards, the search backends, and when `ask_expert` is offered."""

import ssl

import pytest
from pydantic import SecretStr

from app.agent.expert.agent import ask_expert_tool
from app.agent.expert.search import SearchResult, SearxngBackend, TavilyBackend, search_backend
from app.settings import ExpertSettings, Settings
from knowledge.fetch import FetchRefused, PageFetcher, is_public, parse_address
from tests.expert.conftest import DRIP_CHUNKS, TLS_HOST, FakeWeb

PUBLIC_ADDRESS = "93.184.215.14"  # a public address; tests/conftest.py blocks connecting to it


def fetcher(allow_private: bool = True, max_bytes: int = 1_000_000) -> PageFetcher:
    return PageFetcher(5.0, max_bytes, allow_private)


class FakeResolver:
    """Answers host names from `answers`, each name's list of answers in turn (the last one
    repeats), as a DNS server under an attacker's control can; records every question."""

    def __init__(self, **answers: list[list[str]]) -> None:
        self._answers = {host.replace("_", "."): list(seq) for host, seq in answers.items()}
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        answers = self._answers[host]
        return answers.pop(0) if len(answers) > 1 else answers[0]


def pinned_fetcher(
    resolver: FakeResolver, timeout: float = 5.0, ssl_context: ssl.SSLContext | None = None
) -> PageFetcher:
    """Private addresses refused, except the tests' own loopback server at 127.0.0.1."""
    return PageFetcher(
        timeout,
        1_000_000,
        allow_private_addresses=False,
        resolver=resolver,
        ssl_context=ssl_context,
        exempt_addresses=["127.0.0.1"],
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/page",
        "http://localhost:9/page",
        "http://[::1]:9/page",
        "http://10.0.0.8/page",
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
        "http://[::ffff:192.168.1.1]/page",
        "http://[64:ff9b::10.0.0.1]/page",  # NAT64 to a private address
        "http://[64:ff9b::7f00:1]/page",  # NAT64 to loopback
        "http://[64:ff9b:1::8.8.8.8]/page",  # NAT64 for local use
        "http://[2002:a9fe:a9fe::1]/page",  # 6to4 of 169.254.169.254
        "http://[2002:c0a8:101::]/page",  # 6to4 of 192.168.1.1
        "http://[::ffff:0:10.0.0.1]/page",  # SIIT
        "http://[::10.0.0.1]/page",  # IPv4-compatible
        "http://[::8.8.8.8]/page",  # IPv4-compatible, deprecated whatever it carries
        "http://[fec0::1]/page",  # site-local
    ],
)
async def test_private_and_loopback_addresses_are_refused(url: str) -> None:
    with pytest.raises(FetchRefused, match="non-public address"):
        await fetcher(allow_private=False).fetch(url)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "javascript:1"])
async def test_only_http_and_https_are_fetched(url: str) -> None:
    with pytest.raises(FetchRefused, match="only http and https"):
        await fetcher().fetch(url)


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


@pytest.mark.parametrize("path", ["/drip/headers", "/drip/body"])
async def test_a_dripping_server_is_cut_at_the_deadline_for_the_whole_page(
    web: FakeWeb, path: str
) -> None:
    """Each 16-byte read arrives well within the timeout; the page as a whole does not."""
    with pytest.raises(FetchRefused, match=r"took longer than 0.5 s"):
        await PageFetcher(0.5, 1_000_000, allow_private_addresses=True).fetch(web.url(path))

    assert web.requests == [path]
    assert web.dripped_chunks < DRIP_CHUNKS  # cut, not read to the end


async def test_the_checked_address_is_the_one_connected_to(web: FakeWeb) -> None:
    resolver = FakeResolver(docs_example=[["127.0.0.1"]])
    port = web.base_url.rsplit(":", 1)[1]

    page = await pinned_fetcher(resolver).fetch(f"http://docs.example:{port}/gnucash-5-9")

    assert page.title == "GnuCash 5.9 release notes"
    assert resolver.asked == ["docs.example"]
    assert web.hosts == [f"docs.example:{port}"]  # the Host header keeps the name


async def test_dns_rebinding_cannot_reach_a_loopback_page(web: FakeWeb) -> None:
    """The check sees a public address, a second lookup would give 127.0.0.1, and the
    system resolver maps `localhost` there too: only the checked address is connected to."""
    resolver = FakeResolver(localhost=[[PUBLIC_ADDRESS], ["127.0.0.1"]])
    port = web.base_url.rsplit(":", 1)[1]

    with pytest.raises(FetchRefused, match=f"could not be fetched: {PUBLIC_ADDRESS}"):
        await pinned_fetcher(resolver).fetch(f"http://localhost:{port}/gnucash-5-9")

    assert resolver.asked == ["localhost"]
    assert web.requests == []


async def test_an_address_that_refuses_the_connection_is_skipped_for_the_next(
    web: FakeWeb,
) -> None:
    resolver = FakeResolver(docs_example=[[PUBLIC_ADDRESS, "127.0.0.1"]])
    port = web.base_url.rsplit(":", 1)[1]

    page = await pinned_fetcher(resolver).fetch(f"http://docs.example:{port}/gnucash-5-9")

    assert page.title == "GnuCash 5.9 release notes"


@pytest.mark.parametrize(
    ("location", "refused"),
    [
        ("http://metadata.internal/latest/meta-data/", "169.254.169.254"),
        ("http://mixed.example/admin", "10.1.2.3"),
        ("http://10.0.0.8/admin", "10.0.0.8"),
        ("http://[::1]:8080/admin", "::1"),
    ],
)
async def test_a_redirect_to_a_private_address_is_refused(
    web: FakeWeb, location: str, refused: str
) -> None:
    resolver = FakeResolver(
        docs_example=[["127.0.0.1"]],
        metadata_internal=[["169.254.169.254"]],
        mixed_example=[[PUBLIC_ADDRESS, "10.1.2.3"]],
    )
    web.redirects["/moved"] = location
    port = web.base_url.rsplit(":", 1)[1]

    with pytest.raises(FetchRefused, match=rf"non-public address \({refused}\)"):
        await pinned_fetcher(resolver).fetch(f"http://docs.example:{port}/moved")

    assert web.requests == ["/moved"]


async def test_https_to_the_pinned_address_verifies_the_certificate_of_the_name(
    tls_web: FakeWeb, tls_client_context: ssl.SSLContext
) -> None:
    resolver = FakeResolver(docs_example=[["127.0.0.1"]])

    page = await pinned_fetcher(resolver, ssl_context=tls_client_context).fetch(
        tls_web.url("/gnucash-5-9")
    )

    assert page.title == "GnuCash 5.9 release notes"
    assert tls_web.server_names == [TLS_HOST]
    assert tls_web.hosts == [tls_web.base_url.removeprefix("https://")]


async def test_https_to_a_name_the_certificate_does_not_cover_is_refused(
    tls_web: FakeWeb, tls_client_context: ssl.SSLContext
) -> None:
    resolver = FakeResolver(other_example=[["127.0.0.1"]])
    port = tls_web.base_url.rsplit(":", 1)[1]

    with pytest.raises(FetchRefused, match="CERTIFICATE_VERIFY_FAILED"):
        await pinned_fetcher(resolver, ssl_context=tls_client_context).fetch(
            f"https://other.example:{port}/gnucash-5-9"
        )

    assert tls_web.requests == []


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


async def test_a_name_resolving_to_a_translated_private_address_is_refused() -> None:
    resolver = FakeResolver(**{"sneaky.example": [["93.184.216.34", "64:ff9b::a9fe:a9fe"]]})
    with pytest.raises(FetchRefused, match="non-public address"):
        await pinned_fetcher(resolver).fetch("http://sneaky.example/page")


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("64:ff9b::8.8.8.8", True),  # NAT64 to a public address: how IPv6-only hosts reach it
        ("2002:808:808::1", True),  # 6to4 of 8.8.8.8
        ("2606:4700::1111", True),
        ("64:ff9b::192.168.0.1", False),
        ("::ffff:0:127.0.0.1", False),
        ("fec0::1", False),
    ],
)
def test_a_translated_address_is_judged_by_the_ipv4_address_it_reaches(
    address: str, public: bool
) -> None:
    assert is_public(parse_address(address)) is public
