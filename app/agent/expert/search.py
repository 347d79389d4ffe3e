"""Web search backends of the expert, behind one interface: SearxNG's JSON API
(self-hosted, the docker-compose default) and Tavily's hosted API."""

from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from app.settings import ExpertSettings


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    snippet: str


class SearchBackend(Protocol):
    async def search(self, query: str, limit: int) -> list[SearchResult]: ...


def _results(items: list[dict[str, Any]], limit: int) -> list[SearchResult]:
    """SearxNG and Tavily both name a result's fields `title`, `url` and `content`."""
    found = [
        SearchResult(str(item.get("title") or ""), str(item["url"]), str(item.get("content") or ""))
        for item in items
        if item.get("url")
    ]
    return found[:limit]


class SearxngBackend:
    """`GET /search?format=json` of a SearxNG instance whose settings enable the JSON format."""

    def __init__(self, base_url: str, timeout_seconds: float) -> None:
        self._url = base_url.rstrip("/") + "/search"
        self._timeout = timeout_seconds

    async def search(self, query: str, limit: int) -> list[SearchResult]:
        async with httpx.AsyncClient(timeout=self._timeout) as client:
            response = await client.get(self._url, params={"q": query, "format": "json"})
            response.raise_for_status()
        return _results(response.json().get("results") or [], limit)


class TavilyBackend:
    """Tavily's `POST /search` with a bearer API key."""

    def __init__(self, api_key: str, url: str, timeout_seconds: float) -> None:
        self._api_key = api_key
        self._url = url
        self._timeout = timeout_seconds

    async def search(self, query: str, limit: int) -> list[SearchResult]:
        async with httpx.AsyncClient(timeout=self._timeout) as client:
            response = await client.post(
                self._url,
                json={"query": query, "max_results": limit, "search_depth": "basic"},
                headers={"Authorization": f"Bearer {self._api_key}"},
            )
            response.raise_for_status()
        return _results(response.json().get("results") or [], limit)


def search_backend(settings: ExpertSettings) -> SearchBackend | None:
    """SearxNG when its URL is set, else Tavily when its key is set, else none."""
    if settings.searxng_url:
        return SearxngBackend(settings.searxng_url, settings.fetch_timeout_seconds)
    if settings.tavily_api_key:
        return TavilyBackend(
            settings.tavily_api_key.get_secret_value(),
            settings.tavily_url,
            settings.fetch_timeout_seconds,
        )
    return None
