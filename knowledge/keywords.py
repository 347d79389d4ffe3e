"""Signals besides the dense vectors, computed in this process over a collection's passages
in one language (a query's: `knowledge.store`):

- BM25 (`bm25s` on sparse matrices, words stemmed with the language's Snowball stemmer from
  PyStemmer). Qdrant-local scores sparse vectors in Python (38 ms a search on the GnuCash
  manuals); this answers in well under a millisecond.
- For English passages, WordLlama (a 16 MB static English embedder whose weights and
  tokenizer ship in its wheel, MIT licence): one vector per passage, averaged token
  embeddings, so a passage costs microseconds and a query less than e5's tokenizer.

Built from the collection's payloads when a search first needs them.
"""

import json
import logging
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import numpy.typing as npt
import Stemmer

from knowledge.language import identify
from knowledge.types import Passage

# bm25s sets its logger to DEBUG on import (a line per index built): the root's level
# decides instead.
logging.getLogger("bm25s").setLevel(logging.NOTSET)

# Snowball stemmer names by ISO 639-1 code; a language without one is only lower-cased.
_STEMMERS = {
    "da": "danish",
    "de": "german",
    "en": "english",
    "es": "spanish",
    "fi": "finnish",
    "fr": "french",
    "hu": "hungarian",
    "it": "italian",
    "nl": "dutch",
    "no": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sv": "swedish",
    "tr": "turkish",
}
# Chosen on the dev conversations (docs/benchmarks.md, retrieval): a shorter length
# normalisation than Lucene's 0.75 suits passages cut to a token budget.
_K1 = 1.2
_B = 0.4


def query_language(text: str, documentation: str = "en") -> str:
    """The query's language (ISO 639-1; `knowledge.language`), the documentation's when
    too short to tell: cheap enough to run on every search."""
    return identify(text, (documentation,), documentation).language


@cache
def wordllama() -> Any:
    """WordLlama from its wheel's own files. `WordLlama.load` looks for the tokenizer under
    `tokenizer/` while the wheel ships it under `tokenizers/`, then downloads it from a hub:
    we build the model from the packaged files directly, so nothing is fetched."""
    import wordllama as package
    from tokenizers import Tokenizer
    from wordllama.inference import WordLlamaInference

    root = Path(package.__file__).parent
    rows = _mapped_tensor(root / "weights" / "l2_supercat_256.safetensors", "embedding.weight")
    tokenizer = Tokenizer.from_file(str(root / "tokenizers" / "l2_supercat_tokenizer_config.json"))
    # Built on one row: it copies what it is given to float32 (32 MB for the whole table).
    model = WordLlamaInference(rows[:1], tokenizer)
    # The rows as stored (float16), not a float32 copy: `embed` pools them in float32
    # (times the float32 mask), so the vectors are the same. Read from the file as the
    # passages' and queries' tokens need them (rows of words no text has stay on disk), and
    # shared with the page cache: no 16 MB copy in each process.
    model.embedding = rows
    return model


def _mapped_tensor(path: Path, name: str) -> npt.NDArray[Any]:
    """A safetensors file's tensor as a read-only view of the file (its format: an 8-byte
    header length, a JSON header, then the tensors' bytes)."""
    with path.open("rb") as file:
        (length,) = struct.unpack("<Q", file.read(8))
        header = json.loads(file.read(length))
    entry = header[name]
    start, end = entry["data_offsets"]
    dtype = np.dtype({"F16": np.float16, "F32": np.float32}[entry["dtype"]])
    shape = tuple(entry["shape"])
    if end - start != dtype.itemsize * int(np.prod(shape)):
        raise ValueError(f"{path}: {name} holds {end - start} bytes, not its shape's")
    return np.memmap(path, dtype=dtype, mode="r", offset=8 + length + start, shape=shape)


@dataclass(frozen=True)
class KeywordHit:
    passage: Passage
    score: float  # the signal relative to the query (see `KeywordIndex.search`)


class KeywordIndex:
    """BM25 (and, when asked, WordLlama) over passages; see the module docstring."""

    def __init__(
        self, passages: Iterable[tuple[str, Passage]], language: str, *, static: bool = False
    ) -> None:
        """`passages`: (point id, passage) pairs, indexed as heading path + text;
        `static`: also embed them with WordLlama (English only)."""
        items = list(passages)
        self.ids = [point_id for point_id, _ in items]
        self.passages = [passage for _, passage in items]
        name = _STEMMERS.get(language)
        self._stemmer = Stemmer.Stemmer(name) if name else None
        self._model = bm25s.BM25(k1=_K1, b=_B)
        corpus = [indexed_text(passage) for passage in self.passages]
        if items:
            self._model.index(self._tokenize(corpus), show_progress=False)
        self._static: np.ndarray | None = None
        if static and items:
            self._static = unit_rows(np.asarray(wordllama().embed(corpus), dtype=np.float32))

    def __len__(self) -> int:
        return len(self.passages)

    def _tokenize(self, texts: list[str]) -> bm25s.tokenization.Tokenized:
        return bm25s.tokenize(
            texts, stopwords=None, stemmer=self._stemmer, show_progress=False, allow_empty=True
        )

    def static_search(self, query: str, limit: int) -> list[tuple[str, KeywordHit]]:
        """The `limit` passages nearest to the query by WordLlama, each scored by how many
        standard deviations its cosine lies above the mean over all passages."""
        if self._static is None:
            return []
        vector = unit_rows(np.asarray(wordllama().embed([query]), dtype=np.float32))[0]
        cosines = self._static @ vector
        spread = float(cosines.std()) or 1.0
        scores = (cosines - float(cosines.mean())) / spread
        return best_hits(self.ids, self.passages, scores, limit)

    def search(self, query: str, limit: int) -> list[tuple[str, KeywordHit]]:
        """The `limit` best (point id, hit) pairs with a BM25 score above zero, each scored
        relative to the best: 1.0 for the best passage."""
        if not self.passages:
            return []
        stems = bm25s.tokenize(
            [query], stopwords=None, stemmer=self._stemmer, show_progress=False, return_ids=False
        )[0]
        known = [stem for stem in stems if stem in self._model.vocab_dict]
        if not known:
            return []
        scores = self._model.get_scores(known)
        best = float(scores.max())
        if best <= 0:
            return []
        relative = best_hits(self.ids, self.passages, scores / best, limit)
        return [(point_id, hit) for point_id, hit in relative if hit.score > 0]


def indexed_text(passage: Passage) -> str:
    """What the index reads of a passage: its heading path (else its title) and its text."""
    return f"{passage.heading or passage.title}\n{passage.text}"


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def best_hits(
    ids: Sequence[str], passages: Sequence[Passage], scores: np.ndarray, limit: int
) -> list[tuple[str, KeywordHit]]:
    """The `limit` best-scored passages (scores aligned with `ids` and `passages`), best
    first, as (point id, hit)."""
    if limit <= 0 or not len(scores):
        return []
    top = np.argpartition(-scores, min(limit, len(scores) - 1))[:limit]
    top = top[np.argsort(-scores[top])]
    return [(ids[i], KeywordHit(passages[i], float(scores[i]))) for i in top]
