"""Who is calling: staff (a configured bearer token, or the SSO proxy's trusted header)
or an anonymous client. Only staff may use the staff audience and the widget."""

import secrets
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from app.api.deps import SettingsDep


@dataclass(frozen=True)
class Caller:
    name: str | None
    is_staff: bool


ANONYMOUS = Caller(name=None, is_staff=False)


def get_caller(request: Request, settings: SettingsDep) -> Caller:
    widget = settings.widget
    if widget.trusted_user_header and (user := request.headers.get(widget.trusted_user_header)):
        return Caller(name=user, is_staff=True)
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if not token:
        return ANONYMOUS
    if scheme.lower() == "bearer":
        for name, secret in widget.staff_tokens.items():
            if secrets.compare_digest(token.encode(), secret.get_secret_value().encode()):
                return Caller(name=name, is_staff=True)
    raise HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        "invalid credentials",
        headers={"WWW-Authenticate": "Bearer"},
    )


def require_staff(caller: Annotated[Caller, Depends(get_caller)]) -> Caller:
    if not caller.is_staff:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "staff credentials required",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return caller


CallerDep = Annotated[Caller, Depends(get_caller)]
StaffDep = Annotated[Caller, Depends(require_staff)]
