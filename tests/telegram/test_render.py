"""Replies as Telegram HTML: escaping, splitting under the length limit, citations."""

from app.chat.types import Citation
from bot.render import reply_messages, split_text


def test_text_is_escaped_for_html() -> None:
    assert reply_messages('Use a < b & "c" > d', []) == ['Use a &lt; b &amp; "c" &gt; d']


def test_a_long_answer_splits_on_paragraph_boundaries() -> None:
    paragraphs = ["a" * 40, "b" * 40, "c" * 40]
    assert split_text("\n\n".join(paragraphs), limit=90) == [
        f"{'a' * 40}\n\n{'b' * 40}",
        "c" * 40,
    ]


def test_a_paragraph_longer_than_a_message_splits_on_lines_then_words() -> None:
    text = "one two three four\nfive six seven eight nine"
    assert split_text(text, limit=12) == [
        "one two",
        "three four",
        "five six",
        "seven eight",
        "nine",
    ]


def test_the_limit_counts_escaped_characters_and_never_cuts_an_entity() -> None:
    pieces = split_text("&" * 10, limit=12)  # no separators: cut by characters
    assert pieces == ["&&", "&&", "&&", "&&", "&&"]
    assert all(len(p.replace("&", "&amp;")) <= 12 for p in pieces)


def test_citations_link_web_addresses_only() -> None:
    citations = [
        Citation("Filters & reports", "https://docs.example.com/f?a=1&b=2"),
        Citation("Creating an invoice", "en/create-invoice.md"),
    ]
    assert reply_messages("Answer.", citations) == [
        "Answer.\n\nSources:\n"
        '• <a href="https://docs.example.com/f?a=1&amp;b=2">Filters &amp; reports</a>\n'
        "• Creating an invoice"
    ]


def test_sources_that_do_not_fit_get_their_own_message() -> None:
    citation = Citation("Creating an invoice", "en/create-invoice.md")
    assert reply_messages("x" * 90, [citation], limit=100) == [
        "x" * 90,
        "Sources:\n• Creating an invoice",
    ]
