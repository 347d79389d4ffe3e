"""Fetching one web page for the expert: http(s) only, public addresses only, one deadline
for the whole page, bounded in size, main text extracted with trafilatura."""

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TypeVar

import httpx
import trafilatura
from trafilatura.settings import Document

T = TypeVar("T")  # what a fetch answers with

READABLE_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
MAX_REDIRECTS = 3
USER_AGENT = "supportbot-expert/0.1"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# (host, port) -> the host's addresses; the default asks the system (getaddrinfo).
Resolver = Callable[[str, int], Awaitable[list[str]]]


class FetchRefused(Exception):
    """The page may not or could not be fetched; the message says why, for the model."""


@dataclass(frozen=True)
class Page:
    url: str
    title: str
    text: str


async def resolve_host(host: str, port: int) -> list[str]:
    resolved = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(sockaddr[0]) for *_, sockaddr in resolved]


def parse_address(text: str) -> Address:
    """An IPv4-mapped IPv6 address is its IPv4 address: `::ffff:10.0.0.1` is private."""
    address = ipaddress.ip_address(text.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped
    return address


# IPv6 ranges refused whatever follows: IPv4-compatible (`::a.b.c.d`, deprecated), NAT64
# for local use (RFC 8215), site-local (deprecated, still routed inside some networks).
_NEVER_PUBLIC = tuple(
    ipaddress.IPv6Network(network) for network in ("::/96", "64:ff9b:1::/48", "fec0::/10")
)
# IPv6 ranges that carry an IPv4 address in their last 32 bits: NAT64's well-known prefix,
# SIIT's IPv4-translated addresses. (6to4, 2002::/16, carries it in bits 16-48.)
_TRANSLATED = tuple(ipaddress.IPv6Network(n) for n in ("64:ff9b::/96", "::ffff:0:0:0/96"))


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a translated or 6to4 IPv6 address reaches; None for others."""
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in network for network in _TRANSLATED):
        return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    return None


def is_public(address: Address) -> bool:
    """Whether `address` is on the public internet, judging a translated IPv6 address by
    the IPv4 address it reaches (Python 3.11's `is_global` passes `64:ff9b::10.0.0.1`)."""
    if isinstance(address, ipaddress.IPv6Address):
        if any(address in network for network in _NEVER_PUBLIC):
            return False
        if (reached := embedded_ipv4(address)) is not None:
            return reached.is_global
    return address.is_global


def extract_page(url: str, body: str, content_type: str) -> Page:
    if content_type == "text/plain":
        return Page(url, url, body.strip())
    document = trafilatura.bare_extraction(
        body, url=url, with_metadata=True, include_comments=False, include_tables=True
    )
    if not isinstance(document, Document):  # nothing readable
        return Page(url, url, "")
    return Page(url, document.title or url, (document.text or "").strip())


class PageFetcher:
    """Fetches pages with one deadline for the whole page and connects only to addresses
    it has checked. `resolver`, `ssl_context` and `exempt_addresses` (let through the
    block list, e.g. a test's own loopback server) are for tests."""

    def __init__(
        self,
        timeout_seconds: float,
        max_bytes: int,
        allow_private_addresses: bool,
        *,
        resolver: Resolver = resolve_host,
        ssl_context: ssl.SSLContext | None = None,
        exempt_addresses: Collection[str] = (),
    ):
        self._timeout = timeout_seconds
        self._max_bytes = max_bytes
        self._allow_private = allow_private_addresses
        self._resolve = resolver
        self._ssl_context = ssl_context or httpx.create_ssl_context()
        self._exempt = {parse_address(address) for address in exempt_addresses}

    async def fetch(self, url: str) -> Page:
        """The page's title and main text; `FetchRefused` says why there is none."""
        try:
            # httpx's timeout bounds each read; a server dripping bytes would pass it forever.
            async with asyncio.timeout(self._timeout):
                body, encoding, media_type = await self._download(url)
        except TimeoutError as error:
            raise FetchRefused(f"{url} took longer than {self._timeout:g} s") from error
        text = body.decode(encoding, errors="replace")
        return await asyncio.to_thread(extract_page, url, text, media_type)

    async def _download(self, url: str) -> tuple[bytes, str, str]:
        """The body (cut at `max_bytes`), its encoding and media type, redirects followed."""

        async def readable(_: httpx.URL, response: httpx.Response) -> tuple[bytes, str, str]:
            if response.status_code >= 400:
                raise FetchRefused(f"{url} answered HTTP {response.status_code}")
            content_type = response.headers.get("content-type", "text/html")
            media_type = content_type.split(";", 1)[0].strip().lower()
            if media_type not in READABLE_TYPES:
                raise FetchRefused(f"{url} is {media_type}, not a readable page")
            body = await self._read_capped(response)
            return body, response.encoding or "utf-8", media_type

        return await self._follow(url, readable)

    async def _follow(
        self,
        url: str,
        answer: Callable[[httpx.URL, httpx.Response], Awaitable[T]],
        headers_for: Callable[[httpx.URL], Mapping[str, str]] = lambda _: {},
    ) -> T:
        """`answer` of the response `url` leads to, redirects followed, each hop's host
        checked and pinned (`headers_for` a hop: what its request sends besides)."""
        target = httpx.URL(url)
        for _ in range(MAX_REDIRECTS + 1):
            addresses = await self._checked_addresses(target)
            # A client per hop: a kept-alive connection must not carry a request for another
            # host name that happens to resolve to the same address (its TLS check was for
            # the first name).
            async with httpx.AsyncClient(
                timeout=self._timeout,
                headers={"User-Agent": USER_AGENT, **headers_for(target)},
                verify=self._ssl_context,
                trust_env=False,  # a proxy would resolve the host itself, unchecked
            ) as client:
                response = await self._send_pinned(client, target, addresses)
                try:
                    if response.is_redirect and "location" in response.headers:
                        target = target.join(response.headers["location"])
                        continue
                    return await answer(target, response)
                except httpx.HTTPError as error:
                    raise FetchRefused(f"{url} could not be fetched: {error}") from error
                finally:
                    await response.aclose()
        raise FetchRefused(f"{url} redirects more than {MAX_REDIRECTS} times")

    async def _checked_addresses(self, url: httpx.URL) -> list[Address]:
        """`url`'s host resolved once; unless private addresses are allowed, every address
        must be public (one internal address refuses the host)."""
        if url.scheme not in ("http", "https") or not url.host:
            raise FetchRefused(f"only http and https URLs can be fetched, not {url}")
        host = url.raw_host.decode("ascii")  # IDNA-encoded, as DNS wants it
        try:
            addresses = [parse_address(host)]
        except ValueError:  # a name, not an address literal
            port = url.port or (443 if url.scheme == "https" else 80)
            try:
                resolved = await self._resolve(host, port)
            except OSError as error:
                raise FetchRefused(f"cannot resolve {url.host}: {error}") from error
            addresses = list(dict.fromkeys(parse_address(address) for address in resolved))
        if not addresses:
            raise FetchRefused(f"cannot resolve {url.host}: no addresses")
        if not self._allow_private:
            for address in addresses:
                if not is_public(address) and address not in self._exempt:
                    raise FetchRefused(f"{url.host} resolves to a non-public address ({address})")
        return addresses

    async def _send_pinned(
        self, client: httpx.AsyncClient, url: httpx.URL, addresses: list[Address]
    ) -> httpx.Response:
        """GET `url` from the first checked address that accepts a connection. The request
        URL names the address, so nothing resolves the host again (no DNS rebinding); the
        Host header, TLS SNI and the certificate check keep the host's name."""
        failures = []
        for address in addresses:
            request = client.build_request(
                "GET",
                url.copy_with(host=str(address)),
                headers={"Host": url.netloc.decode("ascii")},
                extensions={"sni_hostname": url.raw_host.decode("ascii")},
            )
            try:
                return await client.send(request, stream=True)
            except httpx.ConnectError as error:  # e.g. no IPv6 route: try the next address
                failures.append(f"{address}: {error}")
            except httpx.HTTPError as error:
                raise FetchRefused(f"{url} could not be fetched: {error}") from error
        raise FetchRefused(f"{url} could not be fetched: {'; '.join(failures)}")

    async def _read_capped(self, response: httpx.Response) -> bytes:
        """At most `max_bytes`: a longer page is cut, its start is usually what matters."""
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) >= self._max_bytes:
                break
        return bytes(body[: self._max_bytes])
