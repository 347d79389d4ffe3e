"""Whose memory an item is. A scope names its tenant first, so no query for one scope
can reach another tenant's, and a Telegram user's memory belongs to one chat:

- `api|<API key prefix>|<person>`: a backend's user (the turn's optional `person` id)
- `widget|<staff member>`
- `telegram|<chat id>|<user id>`, and `telegram|<chat id>|*` for the chat's shared facts
"""

SEPARATOR = "|"
CHAT_WIDE = "*"


def _joined(*parts: str) -> str:
    if any(not part or SEPARATOR in part for part in parts):
        raise ValueError(f"a memory scope's parts are non-empty and free of {SEPARATOR!r}")
    return SEPARATOR.join(parts)


def api_scope(key_prefix: str, person: str) -> str:
    return _joined("api", key_prefix or "-", person)


def widget_scope(staff: str) -> str:
    return _joined("widget", staff)


def telegram_scope(chat_id: int, user_id: int | None) -> str:
    return _joined("telegram", str(chat_id), str(user_id) if user_id is not None else CHAT_WIDE)


def tenant_of(scope: str) -> str:
    """The start every scope of the same tenant shares: `api|<key prefix>|` for an API
    key's people, `widget|` for the staff, `telegram|<chat id>|` for a Telegram chat."""
    parts = scope.split(SEPARATOR)
    return SEPARATOR.join(parts[:1] if parts[0] == "widget" else parts[:2]) + SEPARATOR


def is_chat_wide(scope: str) -> bool:
    """A Telegram chat's shared memory, no one person's."""
    parts = scope.split(SEPARATOR)
    return parts[0] == "telegram" and parts[-1] == CHAT_WIDE


def is_staff(scope: str) -> bool:
    return scope.split(SEPARATOR)[0] == "widget"


def shared_scope(scope: str) -> str | None:
    """The Telegram chat's shared memory beside a user's; None elsewhere."""
    parts = scope.split(SEPARATOR)
    if parts[0] == "telegram" and not is_chat_wide(scope):
        return telegram_scope(int(parts[1]), None)
    return None


def read_scopes(scope: str) -> list[str]:
    """What a turn of `scope` sees: its own items and its chat's shared ones."""
    shared = shared_scope(scope)
    return [scope, shared] if shared else [scope]
