"""What conversation keys, staff names and credentials may look like: rules the API,
the widget and the bot share."""

import re
import unicodedata
from urllib.parse import quote

CONVERSATION_KEY_PATTERN = r"^[A-Za-z0-9._:@+-]{1,128}$"
# Conversation keys written by an adapter of their own, never through `/v1` with an API key.
RESERVED_KEY_PREFIXES = ("telegram:", "widget:")

STAFF_NAME_CHARS = 64
# Letters and digits of any script, and `. @ ' + -` and spaces between them: a user name,
# an e-mail address or "Bob Smith", never a list ("alice, mallory") or a control character.
_STAFF_NAME = re.compile(r"[^\W_](?:[\w .@'+-]*[^\W_])?")


# The shortest API key or staff token taken: a guessable one opens conversations.
MIN_CREDENTIAL_CHARS = 16


def widget_key_prefix(staff_name: str) -> str:
    """The start of a staff member's widget conversation keys. A name may hold what a key
    may not ("bob smith"): it is percent-encoded, with `+` for `%`."""
    return "widget:" + quote(staff_name, safe="._@-").replace("%", "+") + ":"


def staff_name(raw: str) -> str:
    """A staff member's name as keys and records carry it: NFC, lower case (an SSO proxy's
    "Alice" and a token's "alice" are one person); ValueError saying why when it is none."""
    name = unicodedata.normalize("NFC", raw).lower()
    if not 1 <= len(name) <= STAFF_NAME_CHARS:
        raise ValueError(f"a staff name has 1 to {STAFF_NAME_CHARS} characters")
    if not _STAFF_NAME.fullmatch(name):
        raise ValueError(
            "a staff name is letters and digits, with . @ ' + - and spaces between them"
        )
    if not re.fullmatch(CONVERSATION_KEY_PATTERN, widget_key_prefix(name) + "0" * 16):
        raise ValueError("a staff name this long leaves no room in a conversation key")
    return name
