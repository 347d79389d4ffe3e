"""An answer's HTML keeps only absolute http(s) and mailto links."""

import pytest

from app.api.markdown import answer_html


@pytest.mark.parametrize(
    "markdown",
    [
        "[the manual](//evil.example/x)",  # protocol-relative: another host
        "[the manual](/v1/handoffs/1/claim)",
        "[the manual](claim)",
        "[the manual](#top)",
        "[the manual](https:/\\evil.example)",
        "[the manual](http:evil.example)",
        "![the manual](//evil.example/pixel.png)",
    ],
)
def test_a_relative_link_loses_its_address(markdown: str) -> None:
    html = answer_html(markdown)
    assert "href" not in html
    assert ">the manual</a>" in html


@pytest.mark.parametrize(
    "address",
    ["https://docs.example.com/a?b=1", "http://docs.example.com/", "mailto:help@example.com"],
)
def test_an_absolute_link_keeps_its_address(address: str) -> None:
    assert f'<a href="{address.replace("&", "&amp;")}" target="_blank"' in answer_html(
        f"[the manual]({address})"
    )
