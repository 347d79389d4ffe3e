"""Reading a retrieved passage the way the offline model quotes it: its paragraphs, list
items and numbered steps (`blocks_of`), its sentences, and the excerpt that fits a
question best (`excerpt`), by the question's word stems."""

import re
from dataclasses import dataclass
from typing import Any

from knowledge.queries import topic_words as content_words

_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_MARKUP = re.compile(r"\*\*|__|`|^\s*(?:[-*+]|\d+\.)\s+|^#+\s+")
_EMPHASIS = re.compile(r"\*\*|__|`")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+(?=[.,:;!?](?:\s|$))")
_STEP = re.compile(r"^\s*\d+[.)]\s+(.*)")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_HEADING = re.compile(r"^\s*#+\s")
_TABLE_RULE = re.compile(r"^[\s|:-]*$")  # a Markdown table's line under its header
MENU_ARROW = "→"

_SUFFIXES = ("ing", "ed", "es", "s")


def sentences_of(text: str) -> list[str]:
    """The sentences of a passage as a reader would quote them: no Markdown emphasis, no
    list numbers, and no headings or other fragments (fewer than three words, or a short
    line with no closing punctuation)."""
    pieces = (_MARKUP.sub("", piece).strip() for piece in _SENTENCE_END.split(text))
    return [
        piece
        for piece in pieces
        if len(words := piece.split()) >= 3 and (piece[-1] in ".!?:" or len(words) >= 8)
    ]


def words_of(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(text) if len(word) > 2}


def _stem(word: str) -> str:
    """Enough stemming to match `invoices` with `invoice` and `posted` with `post`."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)][:6]
    return word[:6]


def stems_of(text: str) -> set[str]:
    return {_stem(word) for word in content_words(text)}


def keywords(text: str) -> str:
    """A reformulated query: the content words alone."""
    return " ".join(content_words(text))


def passage_text(passage: dict[str, Any]) -> str:
    return f"{passage.get('title', '')} {passage.get('heading', '')} {passage['text']}"


@dataclass(frozen=True)
class Block:
    """A paragraph, a list item, a numbered step or a table row of a passage, as plain
    text."""

    kind: str  # "text", "bullet", "step" or "row" (a table's, its cells joined)
    text: str


def blocks_of(text: str) -> list[Block]:
    """The passage's paragraphs, list items and table rows in order; emphasis markers go,
    menu paths and everything else stay as written."""
    blocks: list[list[str]] = []  # [kind, line, line, …]
    for raw in text.splitlines():
        line = _EMPHASIS.sub("", _QUOTE.sub("", raw)).rstrip()
        if not line.strip() or _HEADING.match(line) or _TABLE_RULE.match(line):
            blocks.append([])
            continue
        if line.lstrip().startswith("|"):  # a block of its own: no line continues a row
            cells = (cell.strip() for cell in line.strip().strip("|").split("|"))
            blocks += [["row", " | ".join(cell for cell in cells if cell)], []]
            continue
        if step := _STEP.match(line):
            blocks.append(["step", step[1]])
        elif bullet := _BULLET.match(line):
            blocks.append(["bullet", bullet[1]])
        elif blocks and blocks[-1]:
            blocks[-1].append(line.strip())
        else:
            blocks.append(["text", line.strip()])
    return [
        Block(block[0], _SPACE_BEFORE_PUNCTUATION.sub("", " ".join(block[1:])))
        for block in blocks
        if block
    ]


def _step_runs(blocks: list[Block]) -> list[tuple[str | None, list[str]]]:
    """Each run of numbered steps with the sentence that leads into it (if any)."""
    runs: list[tuple[str | None, list[str]]] = []
    previous: Block | None = None
    for block in blocks:
        if block.kind == "step":
            if previous is None or previous.kind != "step":
                lead = None
                if previous is not None and previous.kind == "text":
                    lead = (sentences_of(previous.text) or [previous.text])[-1]
                runs.append((lead, []))
            runs[-1][1].append(block.text)
        previous = block
    return runs


def quotable(text: str) -> bool:
    """Whether a passage has anything to quote: a paragraph, list item, step or table row
    (not only headings)."""
    return bool(blocks_of(text))


def excerpt(question: str, text: str, *, sentences: int, max_steps: int) -> str:
    """The passage's steps in order when it has steps that fit the question (or nothing
    but steps: its heading said what they do), else its best-matching `sentences` (a list
    item or a table row counting as one) in the document's order; menu paths are kept as
    written. Empty only when the passage has nothing to quote (`quotable`)."""
    asked = stems_of(question)
    blocks = blocks_of(text)

    def fit(text: str) -> int:
        shared = len(asked & stems_of(text))
        return shared + (1 if shared and MENU_ARROW in text else 0)

    units = [
        (block.kind, sentence)
        for block in blocks
        if block.kind != "step"
        for sentence in (
            [block.text] if block.kind in ("bullet", "row") else sentences_of(block.text)
        )
    ]
    runs = _step_runs(blocks)
    if runs:
        lead, steps = max(runs, key=lambda run: fit(" ".join([run[0] or "", *run[1]])))
        if fit(" ".join([lead or "", *steps])) or not units:
            numbered = [f"{n}. {step}" for n, step in enumerate(steps[:max_steps], 1)]
            return "\n".join([lead, *numbered] if lead else numbered)
    ranked = sorted(range(len(units)), key=lambda i: fit(units[i][1]), reverse=True)
    best = ranked[:sentences]
    fitting = [i for i in best if fit(units[i][1])]
    chosen = sorted(fitting or best)  # keep the document's order
    lines: list[str] = []
    for index in chosen:
        kind, sentence = units[index]
        if kind in ("bullet", "row"):
            lines.append(f"- {sentence}")
        elif lines and not lines[-1].startswith("- "):
            lines[-1] += f" {sentence}"
        else:
            lines.append(sentence)
    return "\n".join(lines)
