"""A collection kept in step with a live help center: `supportbot kb sync URL`.

The pages are listed by the site's sitemap (the `Sitemap:` lines of robots.txt, else
sitemap.xml in the start URL's folder or at the site's root; a sitemap index is followed)
or, when there is none, by following links from the start page. Only pages of the same
scheme, host and port under the start URL's folder are read, and only those robots.txt lets
`supportbot-sync` fetch (`urllib.robotparser`; its Crawl-delay is kept, up to
MAX_CRAWL_DELAY seconds).

Each page is fetched with the ETag and Last-Modified stored with its passages (a
conditional GET: a 304 costs no download, no parsing, no embedding), and what comes back
goes through the ingester as files do (`Ingester.ingest_documents`): a changed page's
passages are replaced, a page whose bytes are the same is skipped by its fingerprint, and a
page that answers 404 or 410, or is no longer listed, is deleted. A page that fails any
other way (a 500, a timeout, too large) keeps its passages and is reported. A passage's
source is its page's URL after redirects, which citations link to.

Fetching follows the web expert's rules (`knowledge.fetch.PageFetcher`): http(s)
only, every address checked and connected to as checked, no private addresses unless
`knowledge.sync_allow_private_addresses`, one deadline and a size limit per page.

Nothing is written until the site has answered with a list of pages: an unreachable site,
or one that lists nothing, leaves the collection as it was (`SiteUnavailable`). One module:
listing a site, fetching its pages and handing them to the ingester are one walk over it.
"""

import asyncio
import mimetypes
import time
import zlib
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol
from urllib.robotparser import RobotFileParser

import httpx

from knowledge.fetch import FetchRefused, PageFetcher
from knowledge.ingest import IngestReport, RawDocument, Reading, Unchanged, Unreadable
from knowledge.loaders import HTML_SUFFIXES, SUPPORTED_SUFFIXES
from knowledge.settings import KnowledgeSettings
from knowledge.sources import Removed
from knowledge.store import KnowledgeBase

USER_AGENT = "supportbot-sync/0.1"  # robots.txt rules for `supportbot` apply to it
MAX_CRAWL_DELAY = 30.0
MAX_SITEMAPS = 50  # sitemap files one sync reads (an index and the sitemaps it lists)
GONE = (404, 410)
# What the loaders read, by the media type a server gives.
DOCUMENT_TYPES = {
    "text/html": ".html",
    "application/xhtml+xml": ".xhtml",
    "text/markdown": ".md",
    "text/x-markdown": ".md",
    "application/pdf": ".pdf",
}
# Types a server gives a file it does not know: the URL's suffix then says what it is.
GENERIC_TYPES = ("text/plain", "application/octet-stream")


class SiteUnavailable(Exception):
    """The site gave no list of pages (unreachable, refused, an error, nothing listed):
    the collection was left as it was."""


@dataclass(frozen=True)
class Validators:
    """What a server said identifies a page's version, sent back as If-None-Match and
    If-Modified-Since."""

    etag: str | None = None
    last_modified: str | None = None

    def headers(self) -> dict[str, str]:
        sent = {"If-None-Match": self.etag, "If-Modified-Since": self.last_modified}
        return {name: value for name, value in sent.items() if value}

    def stored(self) -> dict[str, str]:
        kept = {"etag": self.etag, "last_modified": self.last_modified}
        return {name: value for name, value in kept.items() if value}


@dataclass(frozen=True)
class Response:
    url: str  # after redirects
    status: int
    media_type: str
    body: bytes  # a 200's only
    validators: Validators


class SiteFetcher(PageFetcher):
    """The web expert's fetcher (addresses checked, then connected to as checked; one
    deadline for the whole page) answering with what a sync needs: the status, the
    validators and the bytes, for a request that sends the stored validators."""

    def __init__(
        self,
        timeout_seconds: float,
        max_bytes: int,
        allow_private_addresses: bool,
        **options: Any,
    ) -> None:
        # One byte more than the limit is read, to tell a page that is too large.
        super().__init__(timeout_seconds, max_bytes + 1, allow_private_addresses, **options)
        self.max_bytes = max_bytes

    async def get(self, url: str, known: Mapping[str, Validators] | None = None) -> Response:
        """GET `url`, redirects followed, each hop sending the validators `known` holds
        for it; any status is answered, `FetchRefused` says why there is none."""
        try:
            async with asyncio.timeout(self._timeout):
                return await self._get(url, known or {})
        except TimeoutError as error:
            raise FetchRefused(f"{url} took longer than {self._timeout:g} s") from error

    async def _get(self, url: str, known: Mapping[str, Validators]) -> Response:
        async def answered(target: httpx.URL, response: httpx.Response) -> Response:
            body = await self._read_capped(response) if response.status_code == 200 else b""
            if len(body) > self.max_bytes:
                raise FetchRefused(f"{target} is larger than {self.max_bytes:,} bytes")
            content_type = response.headers.get("content-type", "")
            return Response(
                str(target),
                response.status_code,
                content_type.split(";", 1)[0].strip().lower(),
                body,
                Validators(response.headers.get("etag"), response.headers.get("last-modified")),
            )

        def headers(target: httpx.URL) -> dict[str, str]:
            return {"User-Agent": USER_AGENT, **known.get(str(target), Validators()).headers()}

        return await self._follow(url, answered, headers)


def page_url(url: str) -> str:
    """A page's URL as sources and the stored validators name it (no fragment)."""
    return str(httpx.URL(url).copy_with(fragment=None))


@dataclass(frozen=True)
class Site:
    """The pages one sync reads: those of `origin` (scheme, host, port) under `folder`."""

    start: str
    origin: str
    folder: str

    @classmethod
    def of(cls, url: str) -> "Site":
        try:
            parsed = httpx.URL(url.strip())
        except httpx.InvalidURL as error:
            raise ValueError(f"{url!r} is not a URL: {error}") from error
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"{url!r} is not an http(s) URL")
        origin = str(parsed.copy_with(path="/", query=None, fragment=None)).rstrip("/")
        folder = parsed.path[: parsed.path.rfind("/") + 1] or "/"
        return cls(page_url(str(parsed)), origin, folder)

    @property
    def root(self) -> str:
        """What its passages were ingested from (`kb stats` lists it, `kb remove` takes it)."""
        return self.origin + self.folder

    def holds(self, url: str) -> bool:
        return url.startswith(self.root)

    @property
    def start_is_sitemap(self) -> bool:
        return self.start.endswith((".xml", ".xml.gz"))


@dataclass
class SyncReport:
    """A sync's figures: the ingestion's (`ingest`: pages added, changed, deleted,
    unchanged, their chunks, errors) and how the pages were listed and answered."""

    site: str  # the root its passages carry
    ingest: IngestReport
    listed_by: str  # the sitemap, or the start page whose links were followed
    listed: int  # pages of the site listed, those robots.txt disallows included
    not_modified: int  # answered 304: not downloaded
    gone: int  # answered 404 or 410
    disallowed: int  # by robots.txt
    not_documents: dict[str, str]  # URL -> what it is instead (an image, another site's page)
    replaced_sample: Removed | None  # the sample knowledge base, taken out first


class SyncProgress(Protocol):
    def __call__(self, source: str) -> None:
        """A page is done (or, as the ingester reports, the index or calibration starts)."""

    def listed(self, pages: int) -> None:
        """This many pages are listed so far."""


@dataclass(frozen=True)
class _StoredPage:
    validators: Validators
    links: tuple[str, ...]  # the site's pages it links to, for a 304 while following links


def sync_site(
    kb: KnowledgeBase,
    url: str,
    settings: KnowledgeSettings,
    collection: str | None = None,
    progress: SyncProgress | None = None,
    *,
    sample: Path | None = None,
) -> SyncReport:
    """Mirror the help center at `url` into a collection (see the module docstring), then
    calibrate the collection as `kb ingest` does. `sample`: the sample knowledge base,
    taken out of the collection once the site has listed its pages. Raises ValueError for
    a URL that is not http(s), `SiteUnavailable` when the site lists no pages."""
    site = Site.of(url)
    name = collection or kb.collection
    fetcher = SiteFetcher(
        settings.sync_timeout_seconds,
        settings.sync_max_page_bytes,
        settings.sync_allow_private_addresses,
    )
    stored = _stored_pages(kb, name, site.root)
    with asyncio.Runner() as runner:
        crawl = _Crawl(site, fetcher, runner, stored, settings.sync_max_pages, progress)
        crawl.list_pages()
        replaced = kb.replace_sample(sample, None, name) if sample else None
        report = kb.ingest_documents(site.root, crawl.readings(), name, progress, complete=True)
    return crawl.report(report, replaced)


def _stored_pages(kb: KnowledgeBase, collection: str, root: str) -> dict[str, _StoredPage]:
    if not kb.knowledge.collection_exists(collection):
        return {}
    pages: dict[str, _StoredPage] = {}
    fields = ["source", "etag", "last_modified", "links"]
    for _, payload in kb.knowledge.scroll(collection, fields, {"root": root}):
        pages.setdefault(
            payload["source"],
            _StoredPage(
                Validators(payload.get("etag"), payload.get("last_modified")),
                tuple(payload.get("links") or ()),
            ),
        )
    return pages


class _Crawl:
    """One sync's listing and fetching: `list_pages` before anything is written, then
    `readings` for the ingester, a page at a time."""

    def __init__(
        self,
        site: Site,
        fetcher: SiteFetcher,
        runner: asyncio.Runner,
        stored: dict[str, _StoredPage],
        max_pages: int,
        progress: SyncProgress | None,
    ) -> None:
        self.site = site
        self.fetcher = fetcher
        self.runner = runner
        self.stored = stored
        self.known = {url: page.validators for url, page in stored.items()}
        self.max_pages = max_pages
        self.progress = progress
        self.robots = RobotFileParser()
        self.crawl_delay = 0.0
        self.last_request = 0.0
        self.listed_by = site.start
        self.following_links = False
        self.prefetched: dict[str, Response] = {}
        self.queue: deque[str] = deque()
        self.queued: set[str] = set()
        self.fetched = 0
        self.not_modified = 0
        self.gone = 0
        self.disallowed = 0
        self.not_documents: dict[str, str] = {}

    def report(self, ingest: IngestReport, replaced_sample: Removed | None) -> SyncReport:
        return SyncReport(
            site=self.site.root,
            ingest=ingest,
            listed_by=self.listed_by,
            listed=len(self.queued),
            not_modified=self.not_modified,
            gone=self.gone,
            disallowed=self.disallowed,
            not_documents=self.not_documents,
            replaced_sample=replaced_sample,
        )

    # --- listing ----------------------------------------------------------------------

    def list_pages(self) -> None:
        """Read robots.txt and the sitemap (or the start page); `SiteUnavailable` when the
        site does not answer or lists nothing."""
        self._read_robots()
        pages = self._sitemap_pages()
        if pages is None:  # no sitemap: links from the start page, fetched here
            self.following_links = True
            if not self.robots.can_fetch(USER_AGENT, self.site.start):
                raise SiteUnavailable(f"robots.txt disallows {self.site.start}: nothing listed")
            start = self._fetch_listing(self.site.start)
            if start.status >= 400:
                raise SiteUnavailable(f"{self.site.start} answered HTTP {start.status}")
            self.prefetched[self.site.start] = start
            pages = [self.site.start]
        self._enqueue(pages)
        if not self.queue:
            raise SiteUnavailable(f"{self.listed_by} lists no pages under {self.site.root}")

    def _read_robots(self) -> None:
        """RFC 9309: a robots.txt that is missing (4xx) allows everything; one that cannot
        be read (5xx, unreachable) allows nothing, so the sync stops."""
        robots = self._fetch_listing(f"{self.site.origin}/robots.txt")
        if robots.status >= 500:
            raise SiteUnavailable(f"{robots.url} answered HTTP {robots.status}")
        lines = robots.body.decode("utf-8", "replace").splitlines() if robots.status == 200 else []
        self.robots.parse(lines)
        self.crawl_delay = min(float(self.robots.crawl_delay(USER_AGENT) or 0), MAX_CRAWL_DELAY)

    def _sitemap_pages(self) -> list[str] | None:
        """The pages of the first sitemap that lists some under the site's folder; None
        when there is no sitemap."""
        if self.site.start_is_sitemap:
            candidates = [self.site.start]
        else:
            declared = [page_url(url) for url in self.robots.site_maps() or ()]
            candidates = [
                *(url for url in declared if url.startswith(self.site.origin + "/")),
                f"{self.site.root}sitemap.xml",
                f"{self.site.origin}/sitemap.xml",
            ]
        for candidate in dict.fromkeys(candidates):
            pages = self._read_sitemap(candidate)
            if any(self.site.holds(page) for page in pages):
                self.listed_by = candidate
                return pages
        if self.site.start_is_sitemap:
            raise SiteUnavailable(f"{self.site.start} lists no pages under {self.site.root}")
        return None

    def _read_sitemap(self, url: str) -> list[str]:
        """The pages a sitemap lists, those of the sitemaps an index lists included; none
        when it is missing (4xx)."""
        pages: list[str] = []
        pending, seen = deque([url]), {url}
        while pending:
            sitemap = self._fetch_listing(pending.popleft())
            if 400 <= sitemap.status < 500:
                continue
            if sitemap.status != 200:
                raise SiteUnavailable(f"{sitemap.url} answered HTTP {sitemap.status}")
            found, nested = sitemap_entries(sitemap.url, sitemap.body, self.fetcher.max_bytes)
            pages += found
            for child in nested:
                if len(seen) >= MAX_SITEMAPS:
                    break
                if child not in seen and child.startswith(self.site.origin + "/"):
                    seen.add(child)
                    pending.append(child)
        return pages

    def _fetch_listing(self, url: str) -> Response:
        """What listing reads: it fails the sync, not a page."""
        try:
            return self._fetch(url)
        except FetchRefused as refused:
            raise SiteUnavailable(str(refused)) from refused

    def _enqueue(self, urls: list[str]) -> None:
        """Queue the site's pages among `urls` not queued yet, up to `max_pages`."""
        for url in urls:
            if len(self.queued) >= self.max_pages:
                break
            if url in self.queued or not self.site.holds(url) or not _may_be_document(url):
                continue
            self.queued.add(url)
            if self.robots.can_fetch(USER_AGENT, url):
                self.queue.append(url)
            else:
                self.disallowed += 1
        if self.progress:
            self.progress.listed(self.fetched + len(self.queue))

    # --- fetching ---------------------------------------------------------------------

    def _fetch(self, url: str) -> Response:
        wait = self.last_request + self.crawl_delay - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        try:
            return self.runner.run(self.fetcher.get(url, self.known))
        finally:
            self.last_request = time.monotonic()

    def readings(self) -> Iterator[Reading]:
        """Each listed page as the ingester takes it; a page that moved to another listed
        page is read once, under the URL it moved to."""
        read: set[str] = set()
        while self.queue:
            url = self.queue.popleft()
            self.fetched += 1
            reading = self._reading(url)
            if reading is not None and reading.source not in read:
                read.add(reading.source)
                yield reading

    def _reading(self, url: str) -> Reading | None:
        """The page at `url`; None when it is gone or not a document (deleted, if stored)."""
        try:
            response = self.prefetched.pop(url, None) or self._fetch(url)
        except FetchRefused as refused:
            return Unreadable(url, str(refused))
        if response.url != url and not self.site.holds(response.url):
            self.not_documents[url] = f"moved out of the site, to {response.url}"
            return None
        if response.status == 304:
            self.not_modified += 1
            if self.following_links and response.url in self.stored:
                self._enqueue(list(self.stored[response.url].links))
            return Unchanged(response.url)
        if response.status in GONE:
            self.gone += 1
            return None
        if response.status != 200:
            return Unreadable(response.url, f"answered HTTP {response.status}")
        suffix = _suffix(response)
        if suffix is None:
            self.not_documents[response.url] = response.media_type or "no content type"
            return None
        stored: dict[str, Any] = response.validators.stored()
        if self.following_links and suffix in HTML_SUFFIXES:
            links = [
                link for link in page_links(response.url, response.body) if self.site.holds(link)
            ]
            stored["links"] = links
            self._enqueue(links)
        return RawDocument(
            response.url,
            response.body,
            suffix,
            PurePosixPath(httpx.URL(response.url).path),
            stored,
        )


def _suffix(response: Response) -> str | None:
    """Which loader reads the page: by its media type, or by its URL's suffix when the
    type is a generic one; None when it is no document the loaders read."""
    if response.media_type in DOCUMENT_TYPES:
        return DOCUMENT_TYPES[response.media_type]
    suffix = PurePosixPath(httpx.URL(response.url).path).suffix.lower()
    if response.media_type in GENERIC_TYPES and suffix in SUPPORTED_SUFFIXES:
        return suffix
    return None


def _may_be_document(url: str) -> bool:
    """Whether a link may lead to a page: not to a file whose name says it is an image,
    an archive or anything else the loaders do not read."""
    guessed, _ = mimetypes.guess_type(httpx.URL(url).path)
    return guessed is None or guessed in DOCUMENT_TYPES or guessed in GENERIC_TYPES


def sitemap_entries(url: str, body: bytes, max_bytes: int) -> tuple[list[str], list[str]]:
    """(pages, sitemaps) a sitemap or sitemap index lists, gzipped or not. The XML is
    parsed without entities, DTDs or network access."""
    from lxml import etree

    if body[:2] == b"\x1f\x8b":
        inflater = zlib.decompressobj(wbits=31)
        body = inflater.decompress(body, max_bytes + 1)
        if len(body) > max_bytes or inflater.unconsumed_tail:
            raise SiteUnavailable(f"{url} unpacks to more than {max_bytes:,} bytes")
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    try:
        document = etree.fromstring(body, parser)
    except etree.XMLSyntaxError as error:
        raise SiteUnavailable(f"{url} is not a sitemap: {error}") from error
    pages: list[str] = []
    sitemaps: list[str] = []
    for location in document.iter("{*}loc"):
        entry = _absolute(url, location.text or "")
        if entry is None:
            continue
        parent = location.getparent()
        is_index = parent is not None and etree.QName(parent).localname == "sitemap"
        (sitemaps if is_index else pages).append(entry)
    return pages, sitemaps


def _absolute(base: str, link: str) -> str | None:
    """`link` read from `base` as a page URL; None when it is no http(s) URL."""
    try:
        url = httpx.URL(base).join(link.strip())
    except httpx.InvalidURL:
        return None
    return page_url(str(url)) if url.scheme in ("http", "https") and url.host else None


def page_links(url: str, body: bytes) -> list[str]:
    """The URLs a page's `<a href>` lead to, absolute (its `<base>` kept), without their
    fragments, in order, once each."""
    from lxml import etree, html

    try:
        document = html.document_fromstring(body, base_url=url)
    except (etree.ParserError, ValueError):  # nothing parsable, e.g. a PDF
        return []
    document.make_links_absolute(url, resolve_base_href=True, handle_failures="discard")
    found = (
        _absolute(url, link)
        for element, attribute, link, _ in document.iterlinks()
        if element.tag == "a" and attribute == "href"
    )
    return list(dict.fromkeys(link for link in found if link))
