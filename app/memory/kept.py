"""What the model is told about where a "remember that …" of this turn is kept: saved to
the person's memory (and where), or kept in this conversation only (no `person`, no
credential, or an audience whose people are not remembered). The line opens the people's
memory block, so a provider's model reads it, and the offline model answers by it."""

import re

from app.memory.scope import SEPARATOR

THIS_CONVERSATION_ONLY = (
    "Nobody is remembered in this conversation: what the user asks you to remember stays "
    "in this conversation only, not in their next conversations. Say so when they ask you "
    "to remember something; never say it is saved."
)
_SAVED = (
    "What the user asks you to remember is saved to their memory ({place}) and shown to "
    "you in their next conversations. Say where it is saved when they ask."
)
_SAVED_LINE = re.compile(
    re.escape(_SAVED).replace(re.escape("{place}"), r"(?P<place>[^\n]+?)") + r"(?:\n|$)"
)


def place_of(scope: str) -> str:
    """A memory scope as its person reads it: `person “u-1”`, `staff member “alice”`,
    `this Telegram chat`."""
    kind, *parts = scope.split(SEPARATOR)
    if kind == "api":
        return f"person “{parts[-1]}”"
    if kind == "widget":
        return f"staff member “{parts[-1]}”"
    return "this Telegram chat"


def memory_note(scope: str | None) -> str:
    return _SAVED.format(place=place_of(scope)) if scope else THIS_CONVERSATION_ONLY


def saved_place(text: str) -> str | None:
    """Where the note that starts `text` says a "remember that …" is saved; None when
    `text` does not start with that note (nothing is saved beyond this conversation)."""
    match = _SAVED_LINE.match(text)
    return match["place"] if match else None
