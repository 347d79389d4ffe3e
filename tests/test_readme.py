"""The README is the front door: short, every page of docs/ reachable from it, links that
lead somewhere, the sign-in line as `supportbot serve` prints it, and text about the
product only (no account of how it was built)."""

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS, ROOT / "evals" / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")
# How a text tells its own making rather than the product: a work session, the brief,
# yesterday and today, a first person telling what it did.
HISTORY = re.compile(
    r"\b(?:(?:helper|work|working|fourth|third|second|first|earlier|later|same|another|"
    r"numbered)\s+sessions?|sessions? of its own|the brief|yesterday|today|"
    r"I (?:translated|wrote|measured|tried|chose|ran|added|found))\b",
    re.IGNORECASE,
)


CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


def text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def prose(page: Path) -> str:
    """The page without its code: quoted commands, output and test data are not prose."""
    return CODE.sub("", text(page))


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    kept = "".join(
        c for c in heading.strip().lower() if c in " -_" or unicodedata.category(c)[0] in "LN"
    )
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {anchor(h) for h in re.findall(r"^#+ (.+)$", text(page), re.MULTILINE)}


def test_the_readme_is_short() -> None:
    lines = len(text(README).splitlines())
    assert lines < 250, f"README.md has {lines} lines: move detail to docs/"


def test_every_page_of_docs_is_linked_from_the_readme() -> None:
    linked = {target.split("#")[0] for target in LINK.findall(text(README))}
    assert [p.name for p in DOCS if f"docs/{p.name}" not in linked] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_lead_to_a_file_and_heading_that_exist(page: Path) -> None:
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (
            linked.suffix == ".md" and fragment not in {"", *anchors(linked)}
        ):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_text_speaks_of_the_product_only(page: Path) -> None:
    assert HISTORY.findall(prose(page)) == []


def test_the_readme_shows_the_sign_in_line_serve_prints() -> None:
    line = next(line for line in text(README).splitlines() if "/widget#sign-in=" in line)
    said = line.split("http://")[0].strip()
    assert said and f'"{said} %s", sign_in_link' in text(ROOT / "app" / "cli.py")


def test_the_readme_gives_the_two_commands_and_a_curl_to_try() -> None:
    readme = text(README)
    assert "make run" in readme and "make test" in readme
    assert "curl -s -X POST localhost:8000/v1/conversations/demo/messages" in readme
