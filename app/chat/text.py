"""What text the service accepts from people: the same rules for every way in.

A message, an author's name or a comment reaches the database, the model and the logs, so
it is cleaned once at the edge: control characters that no one types (a NUL breaks
PostgreSQL) are removed, line breaks become `\\n`, the text is put in Unicode NFC so the same
words are stored and searched the same way, and text that cannot be stored at all (a lone
UTF-16 surrogate) or that shows nothing (only zero-width characters) is refused.
"""

import re
import unicodedata

# C0 controls and DEL, except tab and line feed (carriage returns are folded first).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")


class InvalidText(ValueError):
    """The text cannot be taken as it is; the message says why, for the sender."""


def normalize_text(text: str) -> str:
    """`text` cleaned: controls removed (tab and `\\n` kept; `\\r\\n` and `\\r` become
    `\\n`), Unicode NFC. Raises InvalidText for a lone surrogate (no encoding can store
    it) and for text whose every character is invisible (zero-width, format or control
    characters). Empty or whitespace-only text is returned as it is: whether that is
    allowed is the caller's rule (a photo may come without a caption)."""
    if _SURROGATES.search(text):
        raise InvalidText("the text contains a lone UTF-16 surrogate, which is not a character")
    cleaned = unicodedata.normalize(
        "NFC", _CONTROLS.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    )
    if text.strip() and not any(_visible(character) for character in cleaned):
        raise InvalidText("the text has no visible characters")
    return cleaned


def _visible(character: str) -> bool:
    # Cf: zero-width space, joiners, the byte-order mark, bidi marks; Z*: spaces.
    return not (character.isspace() or unicodedata.category(character) in ("Cf", "Cc"))
