"""A question's words put into the documentation's own vocabulary, so that BM25 can score a
question in a language no page is written in (a Russian question over English manuals).

Every word of the documentation's pages (three letters or more, seen `MIN_COUNT` times) is
embedded once with the multilingual embedder of `knowledge.crosslingual` (USE v3, trained
on translation pairs); each word of a question is replaced by its `NEAREST` words of that
vocabulary whose cosine reaches `MIN_COSINE`. It is no translation («проводки» comes out
as "deductions"), but every word it gives is one the pages use, and the rarer ones it gets
right ("amortization", "reconcile", "separator") are what BM25 ranks by. The constants were
chosen on the development and first-round question sets of three corpora (the answering
page among the first three: docs/knowledge.md#search); cosines of 0.4 to 0.6 and one to
three words gave the same figures.

Built in the searching process from the passages of the BM25 index it feeds, in the
start-up's warm-up (`KnowledgeBase.warm_up`; again at the first such question after the
collection changes, embedding only the words new to it); the vocabulary's vectors take
about 1.6 s of CPU for the GnuCash manuals' 3,800 English words (8 MB), a page added to
them 0.13 s.
"""

import re
from collections import Counter
from collections.abc import Iterable

import numpy as np

from knowledge.embeddings import Embedder
from knowledge.keywords import unit_rows

MIN_COUNT = 2  # a word seen once is as likely a name or a typo as a term
NEAREST = 2
MIN_COSINE = 0.5
# Words embedded in one call (USE's batches).
BATCH = 256

_WORD = re.compile(r"[^\W\d_]{3,}")


def words_of(text: str) -> list[str]:
    """The text's words of three letters or more, lower-cased."""
    return [word.lower() for word in _WORD.findall(text)]


class WordTranslator:
    """The documentation's vocabulary (words of `texts`) embedded with `embedder`; the
    words `previous` (the same documentation's translator before it changed) holds are
    not embedded again."""

    def __init__(
        self,
        texts: Iterable[str],
        embedder: Embedder,
        previous: "WordTranslator | None" = None,
    ) -> None:
        counts = Counter(word for text in texts for word in words_of(text))
        self._vocabulary = sorted(word for word, count in counts.items() if count >= MIN_COUNT)
        self._embedder = embedder
        self._matrix = (
            self._unit_vectors(self._vocabulary, previous)
            if self._vocabulary
            else np.zeros((0, 1), np.float32)
        )

    def _unit_vectors(self, words: list[str], previous: "WordTranslator | None") -> np.ndarray:
        known = previous._rows() if previous is not None else {}
        new = [word for word in words if word not in known]
        fresh = dict(zip(new, unit_rows(self._embedded(new)), strict=True)) if new else {}
        return np.stack([known[word] if word in known else fresh[word] for word in words])

    def _rows(self) -> dict[str, np.ndarray]:
        return dict(zip(self._vocabulary, self._matrix, strict=True))

    def __len__(self) -> int:
        return len(self._vocabulary)

    def _embedded(self, words: list[str]) -> np.ndarray:
        batches = [
            self._embedder.embed_passages(words[start : start + BATCH])
            for start in range(0, len(words), BATCH)
        ]
        return np.concatenate(batches).astype(np.float32)

    def translate(self, text: str) -> str:
        """The vocabulary's nearest words to each word of `text`, in its order; empty when
        none is near enough (or the vocabulary is empty)."""
        asked = words_of(text)
        if not asked or not self._vocabulary:
            return ""
        cosines = unit_rows(self._embedded(asked)) @ self._matrix.T
        nearest = np.argsort(-cosines, axis=1)[:, :NEAREST]
        return " ".join(
            self._vocabulary[column]
            for row, columns in enumerate(nearest)
            for column in columns
            if cosines[row, column] >= MIN_COSINE
        )
