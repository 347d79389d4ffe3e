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


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text))
