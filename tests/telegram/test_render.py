"""Replies as Telegram messages: Markdown as entities, splitting under the limit (in UTF-16
code units) without breaking an entity, citations."""

from telegram import MessageEntity

from app.chat.types import Citation
from app.settings import KnowledgeSettings
from bot.render import Part, reply_parts


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def spans(part: Part) -> list[tuple[str, str]]:
    """Each entity's type and the text it covers (offsets in UTF-16 code units)."""
    encoded = part.text.encode("utf-16-le")
    return [
        (e.type, encoded[2 * e.offset : 2 * (e.offset + e.length)].decode("utf-16-le"))
        for e in part.entities
    ]


def test_markdown_becomes_entities() -> None:
    answer = (
        "**Step 1.** Open *Sales*, then:\n\n"
        "- pick `New invoice`\n- save it\n\n"
        "See [the guide](https://docs.example.com/a?b=1&c=2).\n\n"
        "```python\nprint('a < b')\n```"
    )
    (part,) = reply_parts(answer, [])
    assert "**" not in part.text and "```" not in part.text and "[" not in part.text
    assert spans(part) == [
        ("bold", "Step 1."),
        ("italic", "Sales"),
        ("code", "New invoice"),
        ("text_link", "the guide"),
        ("pre", "print('a < b')"),
    ]
    link = next(e for e in part.entities if e.type == MessageEntity.TEXT_LINK)
    assert link.url == "https://docs.example.com/a?b=1&c=2"
    assert "save it" in part.text and "a < b" in part.text  # no HTML escaping needed


def test_a_long_answer_splits_under_the_limit_and_keeps_every_entity_whole() -> None:
    paragraph = "Read **the 🧾 invoice rules** first. " + "word " * 30
    parts = reply_parts("\n\n".join([paragraph] * 12), [], limit=400)
    assert len(parts) > 1
    for part in parts:
        assert utf16_len(part.text) <= 400  # Telegram counts UTF-16 code units
        assert all(e.offset + e.length <= utf16_len(part.text) for e in part.entities)
        assert all(text == "the 🧾 invoice rules" for _, text in spans(part))
    assert sum(len(part.entities) for part in parts) == 12


def test_citations_link_web_addresses_and_name_the_others() -> None:
    citations = [
        Citation("Filters & reports", "https://docs.example.com/f?a=1&b=2"),
        Citation("Creating an invoice", "en/create-invoice.md"),
    ]
    (part,) = reply_parts("Answer.", citations)
    assert part.text == "Answer.\n\nSources:\n• Filters & reports\n• Creating an invoice"
    assert spans(part) == [("bold", "Sources:"), ("text_link", "Filters & reports")]
    assert part.entities[1].url == "https://docs.example.com/f?a=1&b=2"


def test_a_document_with_a_public_page_links_to_it() -> None:
    knowledge = KnowledgeSettings(public_base_urls={"kb/en/": "https://docs.example.com/en/"})
    citations = [
        Citation("Creating an invoice", "en/create-invoice.md"),
        Citation("Rechnungen", "de/rechnungen.md"),
    ]
    (part,) = reply_parts("Answer.", citations, link=knowledge.public_url)
    assert spans(part) == [("bold", "Sources:"), ("text_link", "Creating an invoice")]
    assert part.entities[1].url == "https://docs.example.com/en/create-invoice.md"


def test_sources_that_do_not_fit_go_to_the_next_message() -> None:
    citation = Citation("Creating an invoice", "en/create-invoice.md")
    parts = reply_parts("x" * 90, [citation], limit=100)
    assert [p.text for p in parts] == ["x" * 90, "Sources:\n• Creating an invoice"]
    assert spans(parts[1]) == [("bold", "Sources:")]
