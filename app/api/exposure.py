"""Whether serving with these settings would open the API to anyone (checked before the
port is bound, and by the app factory)."""

from app.settings import Settings


class UnsafeExposure(RuntimeError):
    """The API would be open to anonymous callers on a non-loopback address."""


def exposure_problem(settings: Settings) -> str | None:
    """Why serving with these settings would expose an open API; None when it is safe."""
    api = settings.api
    if api.anonymous_allowed and not api.binds_loopback:
        return (
            f"refusing to serve on {api.host}: without SUPPORTBOT_API__KEYS the API is open "
            "to anyone, which is only allowed on a loopback address (e.g. 127.0.0.1)"
        )
    return None


def refuse_unsafe_exposure(settings: Settings) -> None:
    if problem := exposure_problem(settings):
        raise UnsafeExposure(problem)
