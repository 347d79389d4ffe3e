"""Loaders keep titles, heading paths, menu paths, lists and tables; chunks fit budgets."""

from pathlib import Path

import pytest

from knowledge.chunking import chunk_document, truncate_to_tokens
from knowledge.loaders import LoadError, load_document
from knowledge.tokens import count_tokens
from tests.conftest import FIXTURES
from tests.knowledge.conftest import GNUCASH

XHTML = FIXTURES / "xhtml"


def test_docbook_page_drops_navigation_and_keeps_structure() -> None:
    document = load_document(GNUCASH / "gnucash-help-en/busnss-ar-invoices1.html", GNUCASH)
    assert document.source == "gnucash-help-en/busnss-ar-invoices1.html"
    assert (document.title, document.language) == ("Invoices", "en")
    paths = [section.path for section in document.sections]
    assert ("Business Features", "Invoices", "New") in paths
    text = "\n".join(section.text for section in document.sections)
    assert "Business → Customer → New Invoice" in text
    assert "- Invoice Information - Type:" in text  # a list item
    assert "Note:" in text  # an admonition, no longer a layout table
    assert "Prev" not in text and "Next" not in text  # navigation header and footer


NAVIGATED_PAGE = """<html lang="en"><head><title>Sync</title></head><body>
<div class="nav"><a href="/">Homepage</a> | <a href="/wiki">Wiki</a></div>
<p><a href="index.html">Index</a> | <a href="prev.html">Previous</a> |
<a href="next.html">Next</a></p>
<div><h1><a href="sync.html">Synchronizing folders</a></h1>
<a href="about.html">About This Document</a><hr>
<ol><li><a href="#intro">Introduction</a></li><li><a href="#cmds">Commands</a></li></ol>
<p>The tool compares two folders. See <a href="compare.html">comparing files</a> for how
files are compared.</p>
<a href="compare.html"><h2>Comparing</h2><p>How two files are found equal.</p></a>
<table><tr><th>Command</th><th>What it does</th></tr>
<tr><td><a href="#copy">Copy</a></td><td>copies the selected files</td></tr></table>
</div></body></html>"""


def test_lines_that_are_only_links_are_left_out(tmp_path: Path) -> None:
    (tmp_path / "sync.html").write_text(NAVIGATED_PAGE, encoding="utf-8")
    document = load_document(tmp_path / "sync.html", tmp_path)
    text = "\n".join(section.text for section in document.sections)
    for navigation in ("Homepage", "Wiki", "Previous", "About This Document", "Introduction"):
        assert navigation not in text
    assert "See comparing files for how" in text  # a link inside a sentence stays
    assert "| Copy | copies the selected files |" in text  # a table's cell is content
    assert "How two files are found equal." in text  # a link around a paragraph too
    assert document.sections[0].path == ("Synchronizing folders",)  # a heading that links


def test_a_page_of_links_only_has_nothing_to_index(tmp_path: Path) -> None:
    page = '<html><body><p><a href="a.html">About This Document</a></p><hr></body></html>'
    (tmp_path / "index.html").write_text(page, encoding="utf-8")
    with pytest.raises(LoadError) as raised:
        load_document(tmp_path / "index.html", tmp_path)
    assert raised.value.nothing_to_index


def test_docbook_table_becomes_a_markdown_table() -> None:
    document = load_document(GNUCASH / "gnucash-help-en/acct-types.html", GNUCASH)
    assert any("| --- |" in section.text for section in document.sections)


def test_german_manual_is_tagged_german() -> None:
    document = load_document(GNUCASH / "gnucash-guide-de/bus-ar-invoices1.html", GNUCASH)
    assert document.language == "de"


# An HTML parser given XHTML warns, markup and all, into the terminal of whoever ingests it.
@pytest.mark.filterwarnings("error::bs4.XMLParsedAsHTMLWarning")
def test_xhtml_page_is_read_without_a_parser_warning() -> None:
    document = load_document(XHTML / "reconcile.html", XHTML)
    assert (document.title, document.language) == ("Abgleichen", "de")
    assert [section.path for section in document.sections] == [("Konten", "Abgleichen")]
    text = document.sections[0].text
    assert "Aktionen → Abgleichen…" in text
    assert "- Haken Sie jede Buchung ab" in text
    assert "> Die Differenz muss 0,00\xa0€ betragen." in text  # an admonition
    assert "Zurück" not in text and "Weiter" not in text  # navigation header and footer


@pytest.mark.filterwarnings("error::bs4.XMLParsedAsHTMLWarning")
def test_xhtml_that_is_not_well_formed_is_read_as_html_in_its_declared_encoding(
    tmp_path: Path,
) -> None:
    # Latin-2, which bs4 does not guess: read as anything else, "ż" and "ę" come out wrong
    steps = "".join(
        f"<li>Krok {number}: zaznacz każdą pozycję z wyciągu.</li>" for number in range(20)
    )
    page = tmp_path / "uzgadnianie.html"
    markup = (
        '<?xml version="1.0" encoding="iso-8859-2"?>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" lang="pl"><head><title>Uzgadnianie</title>'
        f"</head><body><p>Uzgadnianie&nbsp;konta z wyciągiem.</p><ul>{steps}</ul></body></html>"
    )
    page.write_bytes(markup.encode("iso-8859-2"))
    document = load_document(page, tmp_path)
    text = document.sections[0].text
    assert text.startswith("Uzgadnianie\xa0konta z wyciągiem.\n\n- Krok 0: zaznacz każdą pozycję")
    assert "- Krok 19:" in text


def test_markdown_sections_nest_headings(tmp_path: Path) -> None:
    page = tmp_path / "ru" / "billing.md"
    page.parent.mkdir()
    page.write_text(
        "# Оплата\n\nВводный текст.\n\n## Счета\n\nКак выставить счёт.\n\n"
        "```\n# not a heading\n```\n\n### Возврат\n\nТекст.\n"
    )
    document = load_document(page, tmp_path)
    assert (document.title, document.language, document.source) == ("Оплата", "ru", "ru/billing.md")
    assert [section.path for section in document.sections] == [
        ("Оплата",),
        ("Оплата", "Счета"),
        ("Оплата", "Счета", "Возврат"),
    ]
    assert "# not a heading" in document.sections[1].text


def test_pdf_pages_become_sections(tmp_path: Path) -> None:
    pdf = tmp_path / "guide.pdf"
    pdf.write_bytes(_one_page_pdf("Reconcile the account every month"))
    document = load_document(pdf, tmp_path)
    assert document.sections[0].path == ("guide", "Page 1")
    assert "Reconcile the account every month" in document.sections[0].text


def test_chunks_respect_the_token_budget_and_keep_their_heading() -> None:
    document = load_document(GNUCASH / "gnucash-help-en/set-prefs.html", GNUCASH)
    chunks = chunk_document(document, max_tokens=200, min_tokens=50)
    assert all(count_tokens(chunk.text) <= 200 for chunk in chunks)
    assert all(
        chunk.heading[:2] == ("Customizing GnuCash", "Setting Preferences") for chunk in chunks
    )
    assert len({chunk.heading for chunk in chunks}) > 5


def test_truncate_to_tokens_keeps_whole_words() -> None:
    text = "one two three four five six seven eight nine ten"
    cut = truncate_to_tokens(text, 4)
    assert count_tokens(cut) <= 4 and text.startswith(cut) and not cut.endswith(" ")


@pytest.mark.parametrize(
    "text",
    [
        "Как сверить банковский счёт с ежемесячной выпиской из банка? " * 8,
        "emoji 🙂👍 between ｆｕｌｌｗｉｄｔｈ words and   odd  spacing " * 6,
        "Business Features > Invoices > New: use Business → Customer → New Invoice. " * 6,
    ],
)
def test_truncate_to_tokens_keeps_the_longest_prefix_of_whole_words(text: str) -> None:
    words = text.split(" ")
    for budget in (1, 5, 16, 40):
        longest = max(
            (" ".join(words[:n]) for n in range(len(words) + 1)),
            key=lambda prefix: (count_tokens(prefix) <= budget, len(prefix)),
        )
        assert truncate_to_tokens(text, budget) == longest


def _one_page_pdf(text: str) -> bytes:
    """A minimal valid PDF with one line of Helvetica text (pypdf reads, it cannot typeset)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)
