"""The text a `search_knowledge_base` tool call returns: compact, cited, within a budget."""

from app.tokens import count_tokens
from knowledge.chunking import truncate_to_tokens
from knowledge.types import Passage

# Below this many tokens a truncated passage says too little to be worth its header.
_MIN_USEFUL_TOKENS = 40


def format_passages(query: str, passages: list[Passage], token_budget: int) -> str:
    """Numbered passages, each with title, heading path and source, in `token_budget`
    tokens at most; the last passages are cut (or dropped) to fit."""
    if not passages:
        return f'No knowledge-base passages found for "{query}".'
    lines = [f'Knowledge base results for "{query}":']
    used = count_tokens(lines[0])
    for number, passage in enumerate(passages, start=1):
        heading = passage.heading or passage.title
        header = f"\n[{number}] {passage.title} — {heading} (source: {passage.source})"
        room = token_budget - used - count_tokens(header) - 1
        if room < _MIN_USEFUL_TOKENS:
            break
        text = truncate_to_tokens(passage.text, room)
        if text != passage.text:
            text = truncate_to_tokens(passage.text, room - 1) + "…"
        lines.append(f"{header}\n{text}")
        used += count_tokens(lines[-1]) + 1
    return "\n".join(lines)
