"""The service's one tokenizer: offline (the BPE tables ship inside the `bpe-openai` wheel).

Everything that counts tokens (chunking, the offline model's usage, memory thresholds,
the prefix-cache simulator) uses this module so that the numbers agree.
"""

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import bpe_openai

ENCODING_NAME = "o200k_base"


@lru_cache(maxsize=1)
def _encoding() -> "bpe_openai.Encoding":
    # Imported on first use (its tables take ~0.4 s): commands that count no tokens skip it.
    import bpe_openai

    return bpe_openai.get_encoding(ENCODING_NAME)


def encode(text: str) -> list[int]:
    return list(_encoding().encode(text))


@lru_cache(maxsize=4096)
def count_tokens(text: str) -> int:
    """Cached by content: a turn counts the same texts many times over (the history at
    each memory decision, every search result under two budgets), and conversations send
    the same messages again every turn."""
    return len(_encoding().encode(text))


def leading_text(text: str, max_tokens: int) -> str:
    """The text of the first `max_tokens` tokens of `text`: one encode, cut by a slice of
    the tokens (a character the cut splits is left out)."""
    tokens = _encoding().encode(text)
    if len(tokens) <= max_tokens:
        return text
    cut = len(_encoding().decode_bytes(tokens[:max_tokens]))
    return text.encode("utf-8")[:cut].decode("utf-8", errors="ignore")
