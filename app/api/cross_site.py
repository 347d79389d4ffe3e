"""Requests that change something, refused when a page of another site sent them.

A browser adds what signs a request in by itself (the SSO proxy's cookie, and with it the
proxy's user header) to a form another site posts, so a body-less POST such as a handoff
claim could be forged. Browsers say where a request comes from (`Sec-Fetch-Site`, `Origin`);
other clients (a backend, curl) send neither and are not affected. Allowed: the service's
own pages and SUPPORTBOT_WIDGET__ALLOWED_ORIGINS (the page embedding the widget)."""

from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class CrossSiteGuard:
    def __init__(self, app: ASGIApp, allowed_origins: list[str]) -> None:
        self.app = app
        self.allowed = {origin.rstrip("/").lower() for origin in allowed_origins}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        changes = scope["type"] == "http" and scope["method"] not in SAFE_METHODS
        if changes and (refused := self.refusal(Headers(scope=scope))):
            response = JSONResponse({"detail": refused}, status_code=403)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def refusal(self, headers: Headers) -> str | None:
        """Why a browser's request from this origin may not change anything; None if it may."""
        site = headers.get("sec-fetch-site")  # set by the browser, never by a page
        origin = headers.get("origin")
        if site in ("same-origin", "none") or (site is None and origin is None):
            return None  # the service's own page, typed in by the user, or not a browser
        if origin is not None and origin.rstrip("/").lower() in self.allowed:
            return None
        if site is None and origin is not None and urlsplit(origin).netloc == headers.get("host"):
            return None  # a browser without Sec-Fetch-Site, on the service's own page
        return (
            f"a cross-site request (origin {origin or 'not sent'}) may not change anything: "
            "its origin is not in SUPPORTBOT_WIDGET__ALLOWED_ORIGINS"
        )
