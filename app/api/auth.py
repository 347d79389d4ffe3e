"""Who is calling, and which conversations they may read and write.

Callers: staff (a token from SUPPORTBOT_WIDGET__STAFF_TOKENS, or the SSO proxy's trusted
header), a backend (an API key from SUPPORTBOT_API__KEYS, limited to its key prefix), or,
only while no API key is configured, an anonymous client. The channel a turn is stored
with comes from the credential: staff write through the widget, everyone else through the
API. `telegram:` conversations are written by the bot alone and `widget:` ones by their
staff member alone, so nobody can post into a chat, or claim its key first, by guessing it.
"""

import secrets
from dataclasses import dataclass
from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import Depends, HTTPException, Request, status

from app.api.deps import SettingsDep
from app.settings import RESERVED_KEY_PREFIXES

CallerKind = Literal["staff", "backend", "anonymous"]


@dataclass(frozen=True)
class Caller:
    kind: CallerKind
    name: str | None = None
    key_prefix: str = ""  # a backend's conversation keys start with it
    address: str | None = None  # an anonymous caller's client address

    @property
    def rate_key(self) -> str:
        """Whom the rate limits and the token budget count: the credential, or an
        anonymous caller's address; never a name the request body gives."""
        return f"{self.kind}:{self.name if self.kind != 'anonymous' else self.address}"

    @property
    def is_staff(self) -> bool:
        return self.kind == "staff"

    @property
    def widget_prefix(self) -> str:
        """The start of this staff member's widget conversation keys. A name may hold what a
        key may not ("Bob Smith" from an SSO proxy): it is percent-encoded, with `+` for `%`."""
        return "widget:" + quote(self.name or "", safe="._@-").replace("%", "+") + ":"

    @property
    def channel(self) -> str:
        return "widget" if self.is_staff else "api"

    def may_read(self, key: str) -> str | None:
        """Why this caller may not read conversation `key`; None when it may."""
        if self.kind == "staff":
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


def get_caller(request: Request, settings: SettingsDep) -> Caller:
    widget, api = settings.widget, settings.api
    if widget.trusted_user_header and (user := request.headers.get(widget.trusted_user_header)):
        return Caller(kind="staff", name=user)
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if not token:
        if api.anonymous_allowed:
            return Caller(kind="anonymous", address=request.client.host if request.client else None)
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


def require_staff(caller: Annotated[Caller, Depends(get_caller)]) -> Caller:
    if caller.kind == "backend":
        raise HTTPException(status.HTTP_403_FORBIDDEN, "an API key is not a staff credential")
    if not caller.is_staff:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "staff credentials required", CHALLENGE)
    return caller


CallerDep = Annotated[Caller, Depends(get_caller)]
StaffDep = Annotated[Caller, Depends(require_staff)]
