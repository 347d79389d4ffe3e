"""Who is calling, and which conversations they may read and write.

Callers: staff (a token from SUPPORTBOT_WIDGET__STAFF_TOKENS, or the SSO proxy's trusted
header, believed only from SUPPORTBOT_WIDGET__TRUSTED_PROXIES), a backend (an API key from
SUPPORTBOT_API__KEYS, limited to its key prefix), or, only while no API key is configured,
an anonymous client (one a proxy passed on reaches only the conversations it started:
app/api/conversation_tokens.py). The channel a turn is stored with comes from the
credential: staff write through the widget, everyone else through the API. `telegram:`
conversations are written by the bot alone and `widget:` ones by their staff member alone
(who alone reads them), so nobody can post into a chat, or claim its key first, by guessing
it.
"""

import ipaddress
import logging
import secrets
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Depends, HTTPException, Request, Response, status
from fastapi.routing import APIRoute

from app.api.deps import SettingsDep, get_app_settings, get_runtime
from app.settings import RESERVED_KEY_PREFIXES, WidgetSettings, staff_name, widget_key_prefix

log = logging.getLogger(__name__)

CallerKind = Literal["staff", "backend", "anonymous"]


@dataclass(frozen=True)
class Caller:
    kind: CallerKind
    name: str | None = None
    key_prefix: str = ""  # a backend's conversation keys start with it
    address: str | None = None  # an anonymous caller's peer address
    # An anonymous caller a proxy passed on: it reaches only the conversations it started
    # (app/api/conversation_tokens.py).
    through_proxy: bool = False

    @property
    def rate_key(self) -> str:
        """Whom the rate limits and the token budget count: the credential, or an
        anonymous caller's peer address; never a name the request body gives."""
        return f"{self.kind}:{self.name if self.kind != 'anonymous' else self.address}"

    @property
    def is_staff(self) -> bool:
        return self.kind == "staff"

    @property
    def widget_prefix(self) -> str:
        """The start of this staff member's widget conversation keys."""
        return widget_key_prefix(self.name or "")

    @property
    def channel(self) -> str:
        return "widget" if self.is_staff else "api"

    def may_read(self, key: str) -> str | None:
        """Why this caller may not read conversation `key`; None when it may."""
        if self.kind == "staff":
            if key.startswith("widget:") and not key.startswith(self.widget_prefix):
                return "a staff member's own widget chats are theirs alone"
            return None
        if self.kind == "backend":
            if key.startswith(self.key_prefix):
                return None
            return f"this API key may only use conversation keys starting with {self.key_prefix!r}"
        if key.startswith(RESERVED_KEY_PREFIXES):
            return "conversations of the Telegram bot and the staff widget need staff credentials"
        return None

    def may_write(self, key: str) -> str | None:
        """Why this caller may not post a turn to conversation `key`; None when it may."""
        if key.startswith("telegram:"):
            return "only the Telegram bot writes telegram: conversations"
        if self.kind == "staff":
            own = self.widget_prefix
            if key.startswith(own):
                return None
            return f"staff write their own widget conversations: keys starting with {own!r}"
        return self.may_read(key)


CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _matching(token: str, secrets_by_name: dict[str, str]) -> str | None:
    """The name whose secret is `token`; every secret is compared, in constant time."""
    found = None
    for name, secret in secrets_by_name.items():
        if secrets.compare_digest(token.encode(), secret.encode()):
            found = name
    return found


def _proxy_user(request: Request, widget: WidgetSettings) -> str | None:
    """The staff member the SSO proxy signs in: the trusted header, only from a trusted
    proxy (from any other peer it is ignored and logged), once, and a valid name."""
    header = widget.trusted_user_header
    values = request.headers.getlist(header) if header else []
    if not header or not values:
        return None
    peer = request.client.host if request.client else None
    if not widget.trusts(peer):
        log.warning(
            "ignored the %s header from %s, which is not in SUPPORTBOT_WIDGET__TRUSTED_PROXIES",
            header,
            peer,
        )
        return None
    if len(values) > 1:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, f"the {header} header came {len(values)} times", CHALLENGE
        )
    try:  # Starlette reads header bytes as Latin-1; a proxy sends a name in UTF-8
        return staff_name(values[0].encode("latin-1").decode("utf-8"))
    except ValueError as refused:  # UnicodeDecodeError included
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            f"the {header} header is no staff name: {refused}",
            CHALLENGE,
        ) from refused


FORWARDING_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip")


def _through_proxy(request: Request) -> bool:
    """Whether a proxy passed this request on: it names a client in a forwarding header.
    Behind a proxy on the same host every caller's peer is a loopback address, so the
    peer alone cannot tell a local client from anyone on the internet."""
    return any(name in request.headers for name in FORWARDING_HEADERS)


def _beyond_loopback(request: Request) -> str | None:
    """Why an anonymous caller is refused on the address this request came in on: the one
    the server really listens on (`uvicorn --host 0.0.0.0` reaches the app whatever
    SUPPORTBOT_API__HOST says). None on loopback, a Unix socket, or a test transport."""
    server = request.scope.get("server")
    try:
        address = ipaddress.ip_address(str(server[0])) if server else None
    except ValueError:  # not an IP address: no socket of the network
        return None
    if address is None or address.is_loopback:
        return None
    return (
        f"this request came in on {address}: without SUPPORTBOT_API__KEYS the API answers "
        "anonymous callers only on a loopback address"
    )


async def get_caller(request: Request, settings: SettingsDep) -> Caller:
    widget, api = settings.widget, settings.api
    if user := _proxy_user(request, widget):
        return Caller(kind="staff", name=user)
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if not token:
        if api.anonymous_allowed:
            if refused := _beyond_loopback(request):
                raise HTTPException(status.HTTP_401_UNAUTHORIZED, refused, CHALLENGE)
            return Caller(
                kind="anonymous",
                # Its peer: an open API trusts no proxy (app/api/exposure.py).
                address=request.client.host if request.client else None,
                through_proxy=_through_proxy(request),
            )
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "an API key or staff credentials are required", CHALLENGE
        )
    if scheme.lower() == "bearer":
        staff = {name: secret.get_secret_value() for name, secret in widget.staff_tokens.items()}
        if name := _matching(token, staff):
            return Caller(kind="staff", name=name)
        keys = {name: key.key.get_secret_value() for name, key in api.keys.items()}
        if name := _matching(token, keys):
            return Caller(kind="backend", name=name, key_prefix=api.keys[name].prefix)
    raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid credentials", CHALLENGE)


async def require_staff(caller: Annotated[Caller, Depends(get_caller)]) -> Caller:
    if caller.kind == "backend":
        raise HTTPException(status.HTTP_403_FORBIDDEN, "an API key is not a staff credential")
    if not caller.is_staff:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "staff credentials required", CHALLENGE)
    return caller


CallerDep = Annotated[Caller, Depends(get_caller)]
StaffDep = Annotated[Caller, Depends(require_staff)]


Guard = Callable[[Request], Awaitable[object]]


def guarded_first(guard: Guard) -> type[APIRoute]:
    """A route class whose routes run `guard` before anything else. Dependencies run before
    path, query and body fields are validated, but FastAPI parses a JSON body before it
    solves any dependency: a malformed body would tell a caller the guard refuses 422 and
    how the body is formed. The guard raises the refusal; the route's own dependencies
    still give the endpoint its caller."""

    class GuardedFirst(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()

            async def guarded(request: Request) -> Response:
                await guard(request)
                return await handler(request)

            return guarded

    return GuardedFirst


async def request_caller(request: Request) -> Caller:
    """`get_caller` outside FastAPI's dependencies (a guard's)."""
    return await get_caller(request, await get_app_settings(await get_runtime(request)))


async def staff_request(request: Request) -> Any:
    return await require_staff(await request_caller(request))


StaffFirst = guarded_first(staff_request)
