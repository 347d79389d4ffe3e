"""`supportbot kb sync`: a help center on a local HTTP server whose pages change, move and
disappear between syncs, mirrored into a collection."""

import contextlib
import gzip
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app import kb_cli as cli
from app.settings import KnowledgeSettings, get_settings
from knowledge.store import KnowledgeBase
from knowledge.sync import SiteUnavailable, sitemap_entries, sync_site
from tests.knowledge.help_center import (
    EXPORT,
    INVOICES,
    NEWS,
    REFUNDS,
    REFUNDS_CHANGED,
    HelpCenter,
    help_pages,
    page,
    sources_of,
)
from tests.knowledge.test_cli_errors import one_line_error

ALLOWED = KnowledgeSettings(sync_allow_private_addresses=True)


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    base = KnowledgeBase.open_local(tmp_path / "qdrant", collection="site")
    yield base
    base.close()


def test_a_sync_mirrors_the_listed_pages_then_their_changes_moves_and_removals(
    help_center: HelpCenter, kb: KnowledgeBase
) -> None:
    help_pages(help_center)
    first = sync_site(kb, help_center.url("/help/"), ALLOWED)

    assert first.listed_by == help_center.url("/sitemap.xml")
    pages = ("invoices", "refunds", "passwords", "export")
    assert set(sources_of(kb)) == {help_center.url(f"/help/{name}.html") for name in pages}
    assert (first.ingest.documents_added, first.disallowed) == (4, 1)
    asked = {path for path, _, _ in help_center.requests}
    assert "/help/internal/runbook.html" not in asked  # robots.txt
    assert {"/blog/news.html", "/help/logo.png"}.isdisjoint(asked)  # out of /help/, an image
    found = kb.search("I forgot my password, how do I reset it?", 1)[0]
    assert found.source == help_center.url("/help/passwords.html")  # the public URL, cited
    calibration = kb.calibration()
    assert calibration is not None and calibration.passages == sum(sources_of(kb).values())
    unchanged_before = sources_of(kb)[help_center.url("/help/invoices.html")]

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
    stored = sources_of(kb)
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
                page("Help center", "Answers to billing questions.", links=links),
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
    assert set(sources_of(kb)) == pages  # not the blog, not another site

    # Nothing changed: every page answers 304, the start page's stored links still list
    # the others, so nothing is deleted.
    help_center.requests.clear()
    second = sync_site(kb, help_center.url("/help/"), ALLOWED)
    assert (second.not_modified, second.ingest.documents_unchanged) == (3, 3)
    assert not second.ingest.changed and set(sources_of(kb)) == pages

    # The start page stops linking to refunds: it is no longer listed, so it goes.
    help_center.pages["/help/"] = (
        page("Help center", "Billing questions.", links=("invoices.html",)),
        "text/html",
    )
    help_center.requests.clear()
    third = sync_site(kb, help_center.url("/help/"), ALLOWED)
    assert (third.ingest.documents_updated, third.ingest.documents_deleted) == (1, 1)
    assert help_center.url("/help/refunds.html") not in sources_of(kb)
    assert not help_center.asked("/help/refunds.html")


def test_an_unreachable_or_refused_site_leaves_the_collection_as_it_was(
    help_center: HelpCenter, kb: KnowledgeBase
) -> None:
    help_pages(help_center)
    sync_site(kb, help_center.url("/help/"), ALLOWED)
    before = sources_of(kb)

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
    assert sources_of(kb) == before


def test_a_page_that_fails_keeps_its_passages_and_is_reported(
    help_center: HelpCenter, kb: KnowledgeBase
) -> None:
    help_pages(help_center)
    sync_site(kb, help_center.url("/help/"), ALLOWED)
    before = sources_of(kb)
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
    assert not report.ingest.changed and sources_of(kb) == before


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
    help_pages(help_center)
    runner = CliRunner()
    synced = runner.invoke(cli.app, ["sync", help_center.url("/help/")])
    assert synced.exit_code == 0, synced.output
    assert "site: pages +4 ~0 -0 =0" in synced.output
    assert "1 disallowed by robots.txt" in synced.output
    before = sources_of(kb)

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
    assert sources_of(kb) == before

    # A synced site is taken out by its URL, as a folder by its path.
    removed = runner.invoke(cli.app, ["remove", help_center.url("/help/")])
    assert removed.exit_code == 0, removed.output
    assert "site: documents -4" in removed.output and not sources_of(kb)


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
