"""The staff widget from `make run`: a sign-in link for whoever started the server.

On a loopback bind with no staff credentials configured (no staff token, no SSO header),
`supportbot serve` makes a staff token for a local staff member at start, as a notebook
server does, and prints a link to the widget that carries it. Only someone on this machine
can open the address, and the token changes with every start. The token rides in the URL's
fragment, which the browser never sends, so it stays out of access logs; the widget page
keeps it like a typed-in token. On any other address, or with staff credentials configured,
sign-in stays as configured.
"""

import secrets

from pydantic import SecretStr

from app.settings import Settings

LOCAL_STAFF = "local"


def with_local_sign_in(settings: Settings, port: int) -> tuple[Settings, str | None]:
    """The settings with a staff token for `local` added, and the widget link that signs in
    with it; the settings unchanged and no link when the server is reachable from other
    machines or staff credentials are configured."""
    widget, api = settings.widget, settings.api
    if not api.binds_loopback or widget.staff_tokens or widget.trusted_user_header:
        return settings, None
    token = secrets.token_urlsafe(32)
    widget = widget.model_copy(update={"staff_tokens": {LOCAL_STAFF: SecretStr(token)}})
    host = f"[{api.host}]" if ":" in api.host else api.host
    link = f"http://{host}:{port}/widget#sign-in={token}"
    return settings.model_copy(update={"widget": widget}), link
