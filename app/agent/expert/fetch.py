"""Fetching one web page for the expert: http(s) only, public addresses only, bounded in
time and size, main text extracted with trafilatura."""

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

import httpx
import trafilatura
from trafilatura.settings import Document

READABLE_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
MAX_REDIRECTS = 3
USER_AGENT = "supportbot-expert/0.1"


class FetchRefused(Exception):
    """The page may not or could not be fetched; the message says why, for the model."""


@dataclass(frozen=True)
class Page:
    url: str
    title: str
    text: str


async def check_url(url: httpx.URL, allow_private_addresses: bool) -> None:
    """Refuses anything but http(s) to hosts whose every address is public. Checked again
    on each redirect; a host can still re-resolve between this check and the connection
    (DNS rebinding), see docs/expert.md."""
    if url.scheme not in ("http", "https") or not url.host:
        raise FetchRefused(f"only http and https URLs can be fetched, not {url}")
    if allow_private_addresses:
        return
    try:
        resolved = await asyncio.get_running_loop().getaddrinfo(
            url.host, url.port or (443 if url.scheme == "https" else 80), type=socket.SOCK_STREAM
        )
    except OSError as error:
        raise FetchRefused(f"cannot resolve {url.host}: {error}") from error
    for *_, sockaddr in resolved:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped
        if not address.is_global:
            raise FetchRefused(f"{url.host} resolves to a non-public address ({address})")


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
    def __init__(self, timeout_seconds: float, max_bytes: int, allow_private_addresses: bool):
        self._timeout = timeout_seconds
        self._max_bytes = max_bytes
        self._allow_private = allow_private_addresses

    async def fetch(self, url: str) -> Page:
        """The page's title and main text; `FetchRefused` says why there is none."""
        async with httpx.AsyncClient(
            timeout=self._timeout, headers={"User-Agent": USER_AGENT}
        ) as client:
            target = httpx.URL(url)
            for _ in range(MAX_REDIRECTS + 1):
                await check_url(target, self._allow_private)
                try:
                    async with client.stream("GET", target) as response:
                        if response.is_redirect and "location" in response.headers:
                            target = target.join(response.headers["location"])
                            continue
                        if response.status_code >= 400:
                            raise FetchRefused(f"{url} answered HTTP {response.status_code}")
                        content_type = response.headers.get("content-type", "text/html")
                        media_type = content_type.split(";", 1)[0].strip().lower()
                        if media_type not in READABLE_TYPES:
                            raise FetchRefused(f"{url} is {media_type}, not a readable page")
                        body = await self._read_capped(response)
                except httpx.HTTPError as error:
                    raise FetchRefused(f"{url} could not be fetched: {error}") from error
                text = body.decode(response.encoding or "utf-8", errors="replace")
                return await asyncio.to_thread(extract_page, url, text, media_type)
        raise FetchRefused(f"{url} redirects more than {MAX_REDIRECTS} times")

    async def _read_capped(self, response: httpx.Response) -> bytes:
        """At most `max_bytes`: a longer page is cut, its start is usually what matters."""
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) >= self._max_bytes:
                break
        return bytes(body[: self._max_bytes])
