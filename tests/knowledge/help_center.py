"""A help center on a local HTTP server (a real one, on a loopback port) whose pages the
tests change, move, take away, hold back or make fail between and during syncs."""

import contextlib
import hashlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from knowledge.store import KnowledgeBase

# How long a held page waits for the test to let it go before it answers anyway.
HOLD_SECONDS = 120


def page(title: str, *paragraphs: str, links: tuple[str, ...] = ()) -> bytes:
    body = "".join(f"<p>{text}</p>" for text in paragraphs)
    anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
    return (
        f'<html lang="en"><head><title>{title}</title></head><body><nav>{anchors}</nav>'
        f"<h1>{title}</h1>{body}</body></html>"
    ).encode()


INVOICES = page(
    "Sending an invoice",
    "Open Billing, choose New invoice, add the customer and the items, then press Send.",
    "The customer receives the invoice as a PDF by email and can pay it by card.",
)
REFUNDS = page(
    "Refunds",
    "A customer can ask for a refund within 30 days of the payment.",
    "Refunds go back to the card that paid, and take five business days to arrive.",
)
REFUNDS_CHANGED = page(
    "Refunds",
    "A customer can ask for a refund within 60 days of the payment.",
    "Refunds go back to the card that paid, and take two business days to arrive.",
)
PASSWORDS = page(
    "Resetting your password",
    "On the sign-in page choose Forgot password and enter your email address.",
    "The reset link in the email works for one hour; request a new one after that.",
)
EXPORT = page(
    "Exporting your data",
    "Settings, Data, Export writes every contact and invoice into a CSV file.",
    "Large exports are prepared in the background and sent to you as a download link.",
)
INTERNAL = page("Internal runbook", "Restart the billing workers with the deploy script.")
NEWS = page("Company news", "We opened an office in Lisbon this spring.")


@dataclass
class HelpCenter:
    """Pages by path with an ETag each (a 304 for a request that sends it back), a
    robots.txt, redirects, statuses forced per path and pages held back; `requests` records
    (path, the If-None-Match sent, the status answered)."""

    pages: dict[str, tuple[bytes, str]]
    robots: str = ""
    redirects: dict[str, str] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    # A path answered only once its event is set (a sync caught in the middle).
    holds: dict[str, threading.Event] = field(default_factory=dict)
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


def handler(site: HelpCenter) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path in site.holds:
                site.holds[self.path].wait(HOLD_SECONDS)
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


def sources_of(kb: KnowledgeBase) -> dict[str, int]:
    """Source -> its passages in the collection."""
    counts: dict[str, int] = {}
    for _, payload in kb.knowledge.scroll(kb.collection, ["source"]):
        counts[payload["source"]] = counts.get(payload["source"], 0) + 1
    return counts


def help_pages(site: HelpCenter) -> None:
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


@contextlib.contextmanager
def serving() -> Iterator[HelpCenter]:
    """An empty help center, served until the block ends."""
    site = HelpCenter(pages={})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(site))
    site.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        for held in site.holds.values():
            held.set()
        server.shutdown()
        server.server_close()
