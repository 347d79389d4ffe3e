"""Cut documents into self-contained passages that follow their sections.

A section becomes one chunk when it fits the token budget; a longer one is packed block by
block (paragraphs, lists, tables), then line by line, then word by word. Sections too small
to stand alone are merged into a neighbour under their common heading, keeping their own
heading as a line of the text. Tokens are counted with the service's tokenizer.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from knowledge.loaders import Document, Section
from knowledge.tokens import count_tokens, leading_text

HEADING_SEPARATOR = " > "


@dataclass(frozen=True)
class Chunk:
    heading: tuple[str, ...]
    text: str
    language: str = ""  # "": the document's

    @property
    def heading_text(self) -> str:
        return HEADING_SEPARATOR.join(self.heading)


def chunk_document(document: Document, max_tokens: int, min_tokens: int) -> list[Chunk]:
    pieces = [
        piece for section in document.sections for piece in _split_section(section, max_tokens)
    ]
    return _merge_small_pieces(pieces, max_tokens, min_tokens)


def _split_section(section: Section, max_tokens: int) -> Iterator[Chunk]:
    for text in _pack(section.text.split("\n\n"), "\n\n", max_tokens, _split_block):
        yield Chunk(section.path, text)


def _split_block(block: str, max_tokens: int) -> list[str]:
    return _pack(block.split("\n"), "\n", max_tokens, _split_line)


def _split_line(line: str, max_tokens: int) -> list[str]:
    return _pack(line.split(" "), " ", max_tokens, _split_word)


def _split_word(word: str, max_tokens: int) -> list[str]:
    # A "word" over budget is rare (a URL, a base64 blob): cut it by characters.
    step = max(1, max_tokens * 2)
    return [word[start : start + step] for start in range(0, len(word), step)]


def _pack(
    parts: list[str],
    separator: str,
    max_tokens: int,
    split_further: Callable[[str, int], list[str]],
) -> list[str]:
    """Greedily join parts up to max_tokens; a part over budget is split at a finer level."""
    packed: list[str] = []
    current: list[str] = []
    for part in parts:
        if not part.strip():
            continue
        candidate = separator.join([*current, part])
        if count_tokens(candidate) <= max_tokens:
            current.append(part)
            continue
        if current:
            packed.append(separator.join(current))
            current = []
        if count_tokens(part) <= max_tokens:
            current = [part]
        else:
            packed.extend(split_further(part, max_tokens))
    if current:
        packed.append(separator.join(current))
    return packed


def _merge_small_pieces(pieces: list[Chunk], max_tokens: int, min_tokens: int) -> list[Chunk]:
    merged: list[Chunk] = []
    for piece in pieces:
        if merged:
            previous = merged[-1]
            small = min(count_tokens(previous.text), count_tokens(piece.text)) < min_tokens
            combined = _combine(previous, piece)
            if small and count_tokens(combined.text) <= max_tokens:
                merged[-1] = combined
                continue
        merged.append(piece)
    return merged


def _combine(first: Chunk, second: Chunk) -> Chunk:
    common = 0
    while (
        common < min(len(first.heading), len(second.heading))
        and first.heading[common] == second.heading[common]
    ):
        common += 1
    parts = []
    for chunk in (first, second):
        own_heading = HEADING_SEPARATOR.join(chunk.heading[common:])
        parts.append(f"{own_heading}\n{chunk.text}" if own_heading else chunk.text)
    return Chunk(first.heading[:common], "\n\n".join(parts))


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """A prefix of whole words within max_tokens: the text of its first max_tokens tokens,
    less the word they cut (one encode, where a search on the word count took ~18)."""
    prefix = leading_text(text, max_tokens)
    if prefix == text:
        return text
    if text[len(prefix)] != " ":  # the cut fell inside a word: leave that word out
        prefix = prefix[: max(prefix.rfind(" "), 0)]
    # Words tokenized apart can take a token more than inside the whole text: rare.
    while prefix and count_tokens(prefix) > max_tokens:
        prefix = prefix[: max(prefix.rfind(" "), 0)]
    return prefix
