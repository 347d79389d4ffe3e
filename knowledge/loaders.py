"""Turn HTML, Markdown and PDF files into documents: a title, a language and titled sections.

HTML is cleaned with BeautifulSoup (DocBook navigation, tables of contents and admonition
layout tables go) and converted to Markdown with markdownify, so HTML and Markdown share
one section splitter (markdown-it-py). PDF text comes from pypdf, one section per outline
entry (or per page when the file has no outline).
"""

import io
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from markdown_it import MarkdownIt

if TYPE_CHECKING:
    from bs4 import BeautifulSoup, Tag
    from pypdf import PdfReader

HTML_SUFFIXES = (".html", ".htm", ".xhtml")
MARKDOWN_SUFFIXES = (".md", ".markdown")
PDF_SUFFIXES = (".pdf",)
SUPPORTED_SUFFIXES = HTML_SUFFIXES + MARKDOWN_SUFFIXES + PDF_SUFFIXES

# Language codes recognised in folder names such as `gnucash-help-de` or `sample_kb/ru`.
KNOWN_LANGUAGES = frozenset(
    {"en", "de", "ru", "fr", "es", "it", "pt", "nl", "pl", "uk", "cs", "sv", "da"}
    | {"fi", "no", "ja", "zh", "ko", "tr", "ar", "he", "el", "hu", "ro", "bg"}
)
UNKNOWN_LANGUAGE = "und"
# How much of a page's text its language is read from (a few paragraphs tell it).
TEXT_FOR_LANGUAGE = 2000

# DocBook numbers headings ("7.4.1. New", "Chapter 7. Business Features"); the numbers are
# noise for both the embedder and the reader of a citation.
_SECTION_NUMBER = re.compile(
    r"^(?:(?:Chapter|Kapitel|Appendix|Anhang|Part|Teil)\s+)?[0-9IVXA-Z]{1,4}(?:\.[0-9]+)*\.\s+"
)
_NON_TEXT_CLASSES = [
    *("navheader", "navfooter", "toc", "list-of-figures", "list-of-tables"),
    *("list-of-examples", "mediaobject", "inlinemediaobject"),
]
_ADMONITION_CLASSES = ["note", "tip", "warning", "important", "caution"]
_INLINE_FORMATTING = ["a", "img", "strong", "b", "em", "i", "code", "span", "tt"]


class LoadError(Exception):
    """A file that cannot be turned into a document (corrupt, empty, unsupported).

    `nothing_to_index` marks a readable page without text of its own, such as a
    table-of-contents page once its navigation is dropped: skipped, not an error.
    """

    def __init__(self, message: str, *, nothing_to_index: bool = False) -> None:
        super().__init__(message)
        self.nothing_to_index = nothing_to_index


@dataclass(frozen=True)
class Section:
    path: tuple[str, ...]  # breadcrumbs from the document's parent down to this section
    text: str  # Markdown body without the heading line


@dataclass(frozen=True)
class Document:
    source: str  # path relative to the ingested folder, with forward slashes
    title: str
    language: str
    sections: tuple[Section, ...]


def strip_section_number(heading: str) -> str:
    return _SECTION_NUMBER.sub("", " ".join(heading.split()))


def load_document(path: Path, root: Path, raw: bytes | None = None) -> Document:
    """Read one file (or parse its bytes, read already); raises LoadError naming the
    problem (the caller names the file)."""
    source = path.relative_to(root).as_posix() if path != root else path.name
    try:
        raw = path.read_bytes() if raw is None else raw
    except OSError as exc:
        raise LoadError(f"cannot read: {exc.strerror or exc}") from exc
    return parse_document(source, Path(source), raw, path.suffix.lower())


def parse_document(source: str, location: PurePath, raw: bytes, suffix: str) -> Document:
    """A document out of its bytes, read by the loader of `suffix` (one of
    SUPPORTED_SUFFIXES); `location` is the path its language may be read from and its
    name the title of a page without one (a file's relative path, a URL's path)."""
    if not raw.strip():
        raise LoadError("the file is empty")
    if suffix in HTML_SUFFIXES:
        title, language, sections = _load_html(raw)
    elif suffix in MARKDOWN_SUFFIXES:
        title, language, sections = _load_markdown(raw)
    elif suffix in PDF_SUFFIXES:
        title, language, sections = _load_pdf(raw, location.stem)
    else:
        raise LoadError(f"unsupported file type {suffix!r}")
    sections = [s for s in sections if _WORD_CHARACTER.search(s.text)]  # not only a rule
    if not sections:
        raise LoadError("no text of its own (only navigation)", nothing_to_index=True)
    if language == UNKNOWN_LANGUAGE:
        language = language_from_path(location)
    if language == UNKNOWN_LANGUAGE:
        language = language_of_text(title, sections)
    return Document(
        source=source,
        title=title or location.stem or source,
        language=language,
        sections=tuple(sections),
    )


def language_of_text(title: str, sections: list[Section]) -> str:
    """The language the page is written in, read from its text (fastText's identifier,
    `knowledge.language`) when neither its markup nor its path says; `und` when the text
    is too short to tell."""
    from knowledge.language import identify

    text = " ".join([title, *(section.text for section in sections)])[:TEXT_FOR_LANGUAGE]
    guess = identify(text, expected=(), fallback=UNKNOWN_LANGUAGE)
    return guess.language if guess.language in KNOWN_LANGUAGES else UNKNOWN_LANGUAGE


def language_from_path(relative_path: PurePath) -> str:
    for part in reversed(relative_path.parent.parts):
        code = re.split(r"[-_.]", part.lower())[-1]
        if code in KNOWN_LANGUAGES:
            return code
    return UNKNOWN_LANGUAGE


# --- Markdown -------------------------------------------------------------------------


_markdown_parser = MarkdownIt("commonmark").enable("table")


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LoadError(f"not valid UTF-8 text (byte {exc.start})") from exc


def _load_markdown(raw: bytes) -> tuple[str, str, list[Section]]:
    text = _decode(raw)
    if "\x00" in text:
        raise LoadError("binary content in a Markdown file")
    sections = markdown_sections(text, parents=())
    title = next((s.path[0] for s in sections if s.path), "")
    return title, UNKNOWN_LANGUAGE, sections


def markdown_sections(markdown: str, parents: tuple[str, ...]) -> list[Section]:
    """Split Markdown at its headings; each section carries its full heading path."""
    lines = markdown.splitlines()
    tokens = _markdown_parser.parse(markdown)
    headings = [
        (token.map[0], int(token.tag[1]), inline.content)
        for token, inline in itertools.pairwise(tokens)
        if token.type == "heading_open" and token.map is not None
    ]
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []  # (level, heading) of the enclosing headings
    body_start = 0
    current_path = parents
    for line_number, level, heading in headings:
        sections.append(Section(current_path, _join_lines(lines[body_start:line_number])))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, strip_section_number(heading)))
        current_path = parents + tuple(name for _, name in stack)
        body_start = line_number + 1
        if _is_setext_heading(lines, line_number):
            body_start += 1
    sections.append(Section(current_path, _join_lines(lines[body_start:])))
    return sections


def _join_lines(lines: list[str]) -> str:
    """Body text with whitespace-only lines emptied and blank runs cut to one."""
    text = "\n".join(line.rstrip() for line in lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _is_setext_heading(lines: list[str], line_number: int) -> bool:
    following = lines[line_number + 1] if line_number + 1 < len(lines) else ""
    return bool(re.fullmatch(r"\s*(=+|-+)\s*", following))


# --- HTML -----------------------------------------------------------------------------


@cache
def _plain_markdown_converter() -> Any:
    """markdownify with inline formatting dropped: `**Business** → **Customer**` reads
    worse and embeds worse than `Business → Customer`. Defined on first use, like the
    imports in `_load_html`."""
    from markdownify import MarkdownConverter

    class PlainMarkdownConverter(MarkdownConverter):
        def __init__(self) -> None:
            # wrap without a width: whitespace outside <pre> collapses, as a browser shows
            super().__init__(
                heading_style="ATX",
                bullets="-",
                strip=_INLINE_FORMATTING,
                wrap=True,
                wrap_width=None,
                escape_asterisks=False,
                escape_underscores=False,
            )

    return PlainMarkdownConverter


def _load_html(raw: bytes) -> tuple[str, str, list[Section]]:
    # Imported here: BeautifulSoup (with soupsieve) and markdownify take a while, which a
    # process that ingests no HTML (the service, which imports this module for its types)
    # does without.
    from bs4 import Tag

    if b"\x00" in raw[:4096]:
        raise LoadError("binary content in an HTML file")
    soup = _soup(raw)
    body = soup.body
    if body is None:
        raise LoadError("no <body> in the HTML")
    title_tag = soup.find("title")
    title = strip_section_number(title_tag.get_text()) if title_tag else ""
    html_tag = soup.find("html")
    language = UNKNOWN_LANGUAGE
    if isinstance(html_tag, Tag) and html_tag.get("lang"):
        language = str(html_tag["lang"]).split("-")[0].lower()
    up_link = soup.find("link", rel="up")
    parents = (
        (strip_section_number(str(up_link["title"])),)
        if isinstance(up_link, Tag) and up_link.get("title")
        else ()
    )
    # find_all by class, not CSS select: soupsieve was most of the ingestion time
    for element in body.find_all(["script", "style"]) + body.find_all(class_=_NON_TEXT_CLASSES):
        element.decompose()
    for table in body.find_all("table"):
        if not table.get_text(strip=True):
            table.decompose()  # layout tables left empty once screenshots are gone
    for admonition in body.find_all(class_=_ADMONITION_CLASSES):
        _flatten_admonition(soup, admonition)
    _drop_link_lines(body)
    markdown = _plain_markdown_converter()().convert_soup(body)
    return title, language, markdown_sections(markdown, parents)


# XHTML (DocBook's XSL writes it) opens with an XML declaration; an HTML parser given it
# warns that it is parsing XML, with the markup, into the terminal of whoever ingests it.
_XML_DECLARATION = re.compile(rb"(?:\xef\xbb\xbf)?<\?xml\b[^>]*\?>")
_DECLARED_ENCODING = re.compile(rb"""encoding\s*=\s*["']([A-Za-z0-9._:-]+)["']""")


def _soup(raw: bytes) -> "BeautifulSoup":
    """XHTML that is well-formed XML is read by the XML parser; anything else by the HTML
    parser, XHTML that is not well-formed (an `&nbsp;`, a bare `<` in a script) without its
    XML declaration, whose encoding is kept."""
    from bs4 import BeautifulSoup
    from lxml import etree

    declaration = _XML_DECLARATION.match(raw)
    if declaration is None:
        return BeautifulSoup(raw, "lxml")
    try:
        etree.fromstring(raw)
    except etree.XMLSyntaxError:
        encoding = _DECLARED_ENCODING.search(declaration.group())
        return BeautifulSoup(
            raw[declaration.end() :],
            "lxml",
            from_encoding=encoding.group(1).decode("ascii") if encoding else None,
        )
    return BeautifulSoup(raw, "xml")


# Where a line of text ends. Headings, table cells and preformatted text are not looked
# into: a heading or a cell that is a link is content.
_BLOCK_TAGS = frozenset(
    {"address", "article", "aside", "blockquote", "body", "dd", "div", "dl", "dt", "figure"}
    | {"footer", "form", "header", "hr", "li", "main", "nav", "ol", "p", "section", "ul"}
    | {"h1", "h2", "h3", "h4", "h5", "h6", "pre", "table"}
)
_NOT_LOOKED_INTO = frozenset({"h1", "h2", "h3", "h4", "h5", "h6", "pre", "table"})
_WORD_CHARACTER = re.compile(r"\w")
_LETTER = re.compile(r"[^\W\d_]")


def _drop_link_lines(body: "Tag") -> None:
    """Take out lines whose every letter is a link's ("Homepage | Wiki", "Index | Previous
    | Next", a contents page's "About This Document"): navigation a site's pages repeat,
    which says nothing of the page and, searched, comes near any question."""
    from bs4 import Tag

    looked_into = [
        element
        for element in body.find_all(_BLOCK_TAGS - _NOT_LOOKED_INTO)
        if element.find_parent(_NOT_LOOKED_INTO) is None
    ]

    def is_block(child: Any) -> bool:
        return isinstance(child, Tag) and child.name in _BLOCK_TAGS

    for container in [body, *looked_into]:
        runs = itertools.groupby(list(container.children), key=is_block)
        for line in (list(run) for block, run in runs if not block):
            if _all_links(line):
                for part in line:
                    part.extract()


def _all_links(line: list[Any]) -> bool:
    from bs4 import Tag

    tags = [part for part in line if isinstance(part, Tag)]
    if any(tag.find(_BLOCK_TAGS) for tag in tags):
        return False  # a link around paragraphs (a card with its description) is content
    links = [link for tag in tags for link in ([tag] if tag.name == "a" else tag.find_all("a"))]
    letters = sum(_letters(part.get_text()) for part in line)
    return letters > 0 and sum(_letters(a.get_text()) for a in links if a.get("href")) >= letters


def _letters(text: str) -> int:
    return len(_LETTER.findall(text))


def _flatten_admonition(soup: "BeautifulSoup", admonition: "Tag") -> None:
    """DocBook lays a note out as an icon table; keep it as a quoted 'Note: …'."""
    label = admonition.find("th")
    body = admonition.find_all("td")[-1:] or [admonition]
    quote = soup.new_tag("blockquote")
    if label is not None:
        prefix = soup.new_tag("p")
        prefix.string = f"{label.get_text(strip=True)}:"
        quote.append(prefix)
    for child in list(body[0].children):
        quote.append(child.extract())
    admonition.replace_with(quote)


# --- PDF ------------------------------------------------------------------------------


def _load_pdf(raw: bytes, stem: str) -> tuple[str, str, list[Section]]:
    # Imported here: pypdf takes time and memory to import, which a process that reads no
    # PDF (the service, which imports this module for its types) does without.
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(raw))
        pages = [page.extract_text() or "" for page in reader.pages]
        metadata_title = reader.metadata.title if reader.metadata else None
        starts = list(_outline_starts(reader))
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise LoadError(f"cannot parse the PDF: {exc}") from exc
    title = (metadata_title or "").strip() or stem
    if not starts:
        return (
            title,
            UNKNOWN_LANGUAGE,
            [
                Section((title, f"Page {number}"), text.strip())
                for number, text in enumerate(pages, start=1)
            ],
        )
    starts.sort(key=lambda item: item[0])
    if starts[0][0] > 0:
        starts.insert(0, (0, title))
    sections = []
    for (first, heading), (following, _) in zip(
        starts, [*starts[1:], (len(pages), "")], strict=True
    ):
        text = "\n".join(pages[first : max(following, first + 1)])
        sections.append(Section((title, heading), text.strip()))
    return title, UNKNOWN_LANGUAGE, sections


def _outline_starts(reader: "PdfReader") -> Iterator[tuple[int, str]]:
    """Top-level outline entries as (first page index, title)."""
    for item in reader.outline:
        if isinstance(item, list):
            continue  # nested entries: their parent already starts a section
        page = reader.get_destination_page_number(item)
        if page is not None:
            yield page, strip_section_number(str(item.title))
