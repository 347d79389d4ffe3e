"""app/chat/text.py: the text every way in accepts."""

import pytest

from app.chat.text import InvalidText, normalize_text


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("How do I send an invoice?", "How do I send an invoice?"),
        ("nul\x00 inside", "nul inside"),
        ("bell\x07, escape\x1b[31m and del\x7f", "bell, escape[31m and del"),
        ("tab\tand\nlines", "tab\tand\nlines"),
        ("windows\r\nold mac\rend", "windows\nold mac\nend"),
        ("cafe\u0301", "café"),  # NFC: one code point, as typed on most keyboards
        (
            "👩\u200d💻 emoji sequences keep their joiner",
            "👩\u200d💻 emoji sequences keep their joiner",
        ),
        ("", ""),
        ("   ", "   "),  # whether blank text is allowed is the caller's rule
    ],
)
def test_text_is_cleaned(given: str, kept: str) -> None:
    assert normalize_text(given) == kept


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("\ud800", "lone UTF-16 surrogate"),
        ("text then \udfff", "lone UTF-16 surrogate"),
        ("\u200b", "no visible characters"),
        ("\u200b\u200c\u200d\ufeff \u2060", "no visible characters"),
        ("\x00\x00", "no visible characters"),
    ],
)
def test_text_that_cannot_be_kept_is_refused(given: str, reason: str) -> None:
    with pytest.raises(InvalidText, match=reason):
        normalize_text(given)
