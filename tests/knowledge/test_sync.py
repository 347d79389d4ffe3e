"""`supportbot kb sync`: a help center on a local HTTP server whose pages change, move and
disappear between syncs, mirrored into a collection."""

import contextlib
import gzip
import hashlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app import kb_cli as cli
from app.settings import KnowledgeSettings, get_settings
from knowledge.store import KnowledgeBase
from knowledge.sync import SiteUnavailable, sitemap_entries, sync_site
from tests.knowledge.test_cli_errors import one_line_error

ALLOWED = KnowledgeSettings(sync_allow_private_addresses=True)


def _page(title: str, *paragraphs: str, links: tuple[str, ...] = ()) -> bytes:
    body = "".join(f"<p>{text}</p>" for text in paragraphs)
    anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
    return (
        f'<html lang="en"><head><title>{title}</title></head><body><nav>{anchors}</nav>'
        f"<h1>{title}</h1>{body}</body></html>"
    ).encode()


INVOICES = _page(
    "Sending an invoice",
    "Open Billing, choose New invoice, add the customer and the items, then press Send.",
    "The customer receives the invoice as a PDF by email and can pay it by card.",
)
REFUNDS = _page(
    "Refunds",
    "A customer can ask for a refund within 30 days of the payment.",
    "Refunds go back to the card that paid, and take five business days to arrive.",
)
REFUNDS_CHANGED = _page(
    "Refunds",
    "A customer can ask for a refund within 60 days of the payment.",
    "Refunds go back to the card that paid, and take two business days to arrive.",
)
PASSWORDS = _page(
    "Resetting your password",
    "On the sign-in page choose Forgot password and enter your email address.",
    "The reset link in the email works for one hour; request a new one after that.",
)
EXPORT = _page(
    "Exporting your data",
    "Settings, Data, Export writes every contact and invoice into a CSV file.",
    "Large exports are prepared in the background and sent to you as a download link.",
)
INTERNAL = _page("Internal runbook", "Restart the billing workers with the deploy script.")
NEWS = _page("Company news", "We opened an office in Lisbon this spring.")


@dataclass
class HelpCenter:
    """Pages by path with an ETag each (a 304 for a request that sends it back), a
    robots.txt, redirects, and statuses forced per path; `requests` records (path, the
    If-None-Match sent, the status answered)."""

    pages: dict[str, tuple[bytes, str]]
    robots: str = ""
    redirects: dict[str, str] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    base_url: str = ""
    requests: list[tuple[str, str | None, int]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return self.base_url + path

    def sitemap(self, *paths: str) -> None:
        entries = "".join(f"<url><loc>{self.url(path)}</loc></url>" for path in paths)
        xml = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
        self.pages["/sitemap.xml"] = (xml.encode(), "application/xml")

    def asked(self, path: str) -> list[tuple[str | None, int]]:
        return [(sent, status) for asked, sent, status in self.requests if asked == path]


def _handler(site: HelpCenter) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            sent = self.headers.get("If-None-Match")
            status, headers, body = self._answer(sent)
            site.requests.append((self.path, sent, status))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError):
                self.wfile.write(body)

        def _answer(self, sent: str | None) -> tuple[int, dict[str, str], bytes]:
            if self.path in site.statuses:
                return site.statuses[self.path], {}, b"unavailable"
            if self.path in site.redirects:
                return 301, {"Location": site.redirects[self.path]}, b""
            if self.path == "/robots.txt" and site.robots:
                return 200, {"Content-Type": "text/plain"}, site.robots.encode()
            if self.path not in site.pages:
                return 404, {"Content-Type": "text/html"}, b"<h1>Not found</h1>"
            body, content_type = site.pages[self.path]
            etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
            if sent == etag:
                return 304, {"ETag": etag}, b""
            return 200, {"Content-Type": content_type, "ETag": etag}, body

    return Handler


@pytest.fixture
def help_center() -> Iterator[HelpCenter]:
    site = HelpCenter(pages={})
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    site.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield site
    server.shutdown()
    server.server_close()


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    base = KnowledgeBase.open_local(tmp_path / "qdrant", collection="site")
    yield base
    base.close()


def _sources(kb: KnowledgeBase) -> dict[str, int]:
    """Source -> its passages in the collection."""
    counts: dict[str, int] = {}
    for _, payload in kb.knowledge.scroll(kb.collection, ["source"]):
        counts[payload["source"]] = counts.get(payload["source"], 0) + 1
    return counts


def _help_pages(site: HelpCenter) -> None:
    """Four help pages listed by the sitemap robots.txt names, beside a page robots.txt
    disallows, a page outside /help/ and an image."""
    site.pages.update(
        {
            "/help/invoices.html": (INVOICES, "text/html; charset=utf-8"),
            "/help/refunds.html": (REFUNDS, "text/html"),
            "/help/passwords.html": (PASSWORDS, "text/html"),
            "/help/export.html": (EXPORT, "text/html"),
            "/help/internal/runbook.html": (INTERNAL, "text/html"),
            "/blog/news.html": (NEWS, "text/html"),
            "/help/logo.png": (b"\x89PNG\r\n", "image/png"),
        }
    )
    site.robots = (
        f"User-agent: *\nDisallow: /help/internal/\n\nSitemap: {site.url('/sitemap.xml')}\n"
    )
    site.sitemap(*(path for path in site.pages if path != "/sitemap.xml"))


def test_a_sync_mirrors_the_listed_pages_then_their_changes_moves_and_removals(
    help_center: HelpCenter, kb: KnowledgeBase
) -> None:
    _help_pages(help_center)
    first = sync_site(kb, help_center.url("/help/"), ALLOWED)

    assert first.listed_by == help_center.url("/sitemap.xml")
    pages = ("invoices", "refunds", "passwords", "export")
    assert set(_sources(kb)) == {help_center.url(f"/help/{page}.html") for page in pages}
    assert (first.ingest.documents_added, first.disallowed) == (4, 1)
    asked = {path for path, _, _ in help_center.requests}
    assert "/help/internal/runbook.html" not in asked  # robots.txt
    assert {"/blog/news.html", "/help/logo.png"}.isdisjoint(asked)  # out of /help/, an image
    found = kb.search("I forgot my password, how do I reset it?", 1)[0]
    assert found.source == help_center.url("/help/passwords.html")  # the public URL, cited
    calibration = kb.calibration()
    assert calibration is not None and calibration.passages == sum(_sources(kb).values())
    unchanged_before = _sources(kb)[help_center.url("/help/invoices.html")]

    # Refunds change, passwords disappear, export moves (the old URL redirects to it).
    help_center.pages["/help/refunds.html"] = (REFUNDS_CHANGED, "text/html")
    del help_center.pages["/help/passwords.html"]
    help_center.pages["/help/guides/export.html"] = help_center.pages.pop("/help/export.html")
    help_center.redirects["/help/export.html"] = "/help/guides/export.html"
    help_center.sitemap(
        "/help/invoices.html",
        "/help/refunds.html",
        "/help/passwords.html",
        "/help/guides/export.html",
    )
    help_center.requests.clear()
    second = sync_site(kb, help_center.url("/help/"), ALLOWED)

    report = second.ingest
    counts = (
        report.documents_added,
        report.documents_updated,
        report.documents_deleted,
        report.documents_unchanged,
    )
    assert counts == (1, 1, 2, 1)  # +export's new URL ~refunds -passwords -export's old URL
    assert (second.not_modified, second.gone) == (1, 1)
    # The unchanged page was asked for with its ETag, answered 304 and embedded again by
    # nobody: every chunk written is one of the changed or moved page's.
    [(etag, status)] = help_center.asked("/help/invoices.html")
    assert etag and status == 304
    stored = _sources(kb)
    assert (
        report.chunks_unchanged
        == unchanged_before
        == stored[help_center.url("/help/invoices.html")]
    )
    changed = (help_center.url("/help/refunds.html"), help_center.url("/help/guides/export.html"))
    assert report.chunks_added == sum(stored[url] for url in changed)
    assert set(stored) == {help_center.url("/help/invoices.html"), *changed}

    refund = kb.search("How long do I have to ask for a refund?", 1)[0]
    assert refund.source == help_center.url("/help/refunds.html")
    assert "60 days" in refund.text and "30 days" not in refund.text
    password = kb.search("I forgot my password, how do I reset it?", 4)
    assert help_center.url("/help/passwords.html") not in {p.source for p in password}
    recalibrated = kb.calibration()
    assert recalibrated is not None and recalibrated.passages == sum(stored.values())


def test_without_a_sitemap_the_links_under_the_start_page_are_followed(
    help_center: HelpCenter, kb: KnowledgeBase
) -> None:
    links = ("invoices.html", "refunds.html#card", "/blog/news.html", "https://example.org/")
    help_center.pages.update(
        {
            "/help/": (
                _page("Help center", "Answers to billing questions.", links=links),
                "text/html",
            ),
            "/help/invoices.html": (INVOICES, "text/html"),
            "/help/refunds.html": (REFUNDS, "text/html"),
            "/blog/news.html": (NEWS, "text/html"),
        }
    )
    first = sync_site(kb, help_center.url("/help/"), ALLOWED)
    pages = {
        help_center.url(path) for path in ("/help/", "/help/invoices.html", "/help/refunds.html")
    }
    assert first.listed_by == help_center.url("/help/")
    assert set(_sources(kb)) == pages  # not the blog, not another site

    # Nothing changed: every page answers 304, the start page's stored links still list
    # the others, so nothing is deleted.
    help_center.requests.clear()
    second = sync_site(kb, help_center.url("/help/"), ALLOWED)
    assert (second.not_modified, second.ingest.documents_unchanged) == (3, 3)
    assert not second.ingest.changed and set(_sources(kb)) == pages

    # The start page stops linking to refunds: it is no longer listed, so it goes.
    help_center.pages["/help/"] = (
        _page("Help center", "Billing questions.", links=("invoices.html",)),
        "text/html",
    )
    help_center.requests.clear()
    third = sync_site(kb, help_center.url("/help/"), ALLOWED)
    assert (third.ingest.documents_updated, third.ingest.documents_deleted) == (1, 1)
    assert help_center.url("/help/refunds.html") not in _sources(kb)
    assert not help_center.asked("/help/refunds.html")


def test_an_unreachable_or_refused_site_leaves_the_collection_as_it_was(
    help_center: HelpCenter, kb: KnowledgeBase
) -> None:
    _help_pages(help_center)
    sync_site(kb, help_center.url("/help/"), ALLOWED)
    before = _sources(kb)

    help_center.statuses["/robots.txt"] = 503
    with pytest.raises(SiteUnavailable, match=r"robots\.txt answered HTTP 503"):
        sync_site(kb, help_center.url("/help/"), ALLOWED)
    del help_center.statuses["/robots.txt"]
    help_center.statuses["/sitemap.xml"] = 500
    with pytest.raises(SiteUnavailable, match=r"sitemap\.xml answered HTTP 500"):
        sync_site(kb, help_center.url("/help/"), ALLOWED)
    # By default a site on a loopback address is refused, as the web expert refuses it.
    with pytest.raises(SiteUnavailable, match="non-public address"):
        sync_site(kb, help_center.url("/help/"), KnowledgeSettings())
    assert _sources(kb) == before


def test_a_page_that_fails_keeps_its_passages_and_is_reported(
    help_center: HelpCenter, kb: KnowledgeBase
) -> None:
    _help_pages(help_center)
    sync_site(kb, help_center.url("/help/"), ALLOWED)
    before = _sources(kb)
    help_center.statuses["/help/refunds.html"] = 500
    help_center.pages["/help/export.html"] = (EXPORT + b" " * 4000, "text/html")
    small = KnowledgeSettings(sync_allow_private_addresses=True, sync_max_page_bytes=3000)
    report = sync_site(kb, help_center.url("/help/"), small)

    assert report.ingest.errors == {
        help_center.url("/help/refunds.html"): "answered HTTP 500",
        help_center.url("/help/export.html"): (
            f"{help_center.url('/help/export.html')} is larger than 3,000 bytes"
        ),
    }
    assert not report.ingest.changed and _sources(kb) == before


@pytest.fixture
def cli_settings(monkeypatch: pytest.MonkeyPatch, kb: KnowledgeBase) -> Iterator[None]:
    monkeypatch.setattr(cli, "open_knowledge_base", lambda: contextlib.nullcontext(kb))
    monkeypatch.setenv("SUPPORTBOT_KNOWLEDGE__SYNC_ALLOW_PRIVATE_ADDRESSES", "true")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_the_command_reports_the_counts_and_one_line_for_a_site_that_is_down(
    help_center: HelpCenter, kb: KnowledgeBase, cli_settings: None
) -> None:
    _help_pages(help_center)
    runner = CliRunner()
    synced = runner.invoke(cli.app, ["sync", help_center.url("/help/")])
    assert synced.exit_code == 0, synced.output
    assert "site: pages +4 ~0 -0 =0" in synced.output
    assert "1 disallowed by robots.txt" in synced.output
    before = _sources(kb)

    help_center.statuses["/help/refunds.html"] = 500
    failing = runner.invoke(cli.app, ["sync", help_center.url("/help/")])
    assert failing.exit_code == 1
    assert "pages +0 ~0 -0 =3" in failing.output
    assert f"{help_center.url('/help/refunds.html')}: answered HTTP 500" in failing.output

    with socket.socket() as closed:  # a port nothing listens on once it is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    unreachable = runner.invoke(cli.app, ["sync", f"http://127.0.0.1:{port}/help/"])
    line = one_line_error(unreachable)
    assert "could not be fetched" in line and line.endswith("'site' is left as it was")
    not_a_url = runner.invoke(cli.app, ["sync", "ftp://example.org/help/"])
    assert "not an http(s) URL" in one_line_error(not_a_url, 2)
    assert _sources(kb) == before

    # A synced site is taken out by its URL, as a folder by its path.
    removed = runner.invoke(cli.app, ["remove", help_center.url("/help/")])
    assert removed.exit_code == 0, removed.output
    assert "site: documents -4" in removed.output and not _sources(kb)


def test_a_gzipped_sitemap_index_lists_its_sitemaps_and_a_bomb_is_refused() -> None:
    index = (
        b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<sitemap><loc>https://help.example.com/docs/pages.xml</loc></sitemap>"
        b"</sitemapindex>"
    )
    url = "https://help.example.com/sitemap.xml.gz"
    assert sitemap_entries(url, gzip.compress(index), 10_000) == (
        [],
        ["https://help.example.com/docs/pages.xml"],
    )
    plain = (
        b"<urlset><url><loc> /docs/a.html#top </loc></url><url><loc>ftp://x/</loc></url></urlset>"
    )
    assert sitemap_entries(url, plain, 10_000) == (["https://help.example.com/docs/a.html"], [])
    with pytest.raises(SiteUnavailable, match="unpacks to more than 10,000 bytes"):
        sitemap_entries(url, gzip.compress(b" " * 20_000 + index), 10_000)
    with pytest.raises(SiteUnavailable, match="is not a sitemap"):
        sitemap_entries(url, b"<html><p>Sitemap</html", 10_000)
