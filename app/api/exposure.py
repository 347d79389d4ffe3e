"""Whether serving with these settings would open the API to anyone (checked before the
port is bound, and by the app factory)."""

import os
from collections.abc import Mapping

from app.settings import Settings

# uvicorn's own list of trusted proxies (`--forwarded-allow-ips`), read from the environment
# when `uvicorn` serves the app itself.
UVICORN_PROXY_VARIABLES = ("FORWARDED_ALLOW_IPS", "UVICORN_FORWARDED_ALLOW_IPS")


class UnsafeExposure(RuntimeError):
    """The API would be open to anonymous callers beyond this machine."""


def exposure_problem(settings: Settings, environ: Mapping[str, str] = os.environ) -> str | None:
    """Why serving with these settings would expose an open API; None when it is safe."""
    api = settings.api
    if not api.anonymous_allowed:
        return None
    if not api.binds_loopback:
        return (
            f"refusing to serve on {api.host}: without SUPPORTBOT_API__KEYS the API is open "
            "to anyone, which is only allowed on a loopback address (e.g. 127.0.0.1)"
        )
    # Behind a proxy on the same host, the loopback address is everyone's.
    trusted = ["SUPPORTBOT_WIDGET__TRUSTED_PROXIES"] if settings.widget.trusted_proxies else []
    trusted += [name for name in UVICORN_PROXY_VARIABLES if environ.get(name)]
    if trusted:
        return (
            f"refusing to serve behind the proxies of {' and '.join(trusted)}: without "
            "SUPPORTBOT_API__KEYS the API would be open to anyone the proxy lets in; set "
            "SUPPORTBOT_API__KEYS"
        )
    return None


def refuse_unsafe_exposure(settings: Settings) -> None:
    if problem := exposure_problem(settings):
        raise UnsafeExposure(problem)
