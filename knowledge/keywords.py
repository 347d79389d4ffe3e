"""BM25 over a collection's passages, in this process (`bm25s` on sparse matrices).

Qdrant-local scores sparse vectors in Python (38 ms a search on the GnuCash manuals); this
index answers in well under a millisecond. It holds the passages of one language, the
documentation's, stemmed with that language's Snowball stemmer (PyStemmer), and is built
from the collection's payloads when a search first needs it.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass

import bm25s
import numpy as np
import Stemmer

from knowledge.types import Passage

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
# Chosen on the dev conversations (README, knowledge-base section): a shorter length
# normalisation than Lucene's 0.75 suits passages cut to a token budget.
_K1 = 1.2
_B = 0.4
# fmt: off
_GERMAN_WORDS = frozenset({
    "ich", "wie", "wo", "der", "die", "das", "und", "nicht", "ist", "ein", "eine", "kann",
    "mit", "für", "wir", "sie", "auf", "zu", "den", "dem", "bei", "muss", "gibt", "es",
})
# fmt: on
_WORD = re.compile(r"\w+", re.UNICODE)


def query_language(text: str) -> str:
    """`ru`, `de` or `en`: cheap enough to run on every search and to greet in the asker's
    language (Cyrillic letters; German umlauts, ß or two common German words), English
    otherwise."""
    if re.search(r"[а-яё]", text, re.IGNORECASE):
        return "ru"
    words = {word.lower() for word in _WORD.findall(text)}
    if re.search(r"[äöüß]", text, re.IGNORECASE) or len(words & _GERMAN_WORDS) >= 2:
        return "de"
    return "en"


@dataclass(frozen=True)
class KeywordHit:
    passage: Passage
    score: float  # BM25 divided by the query's best BM25: 1.0 for the best passage


class KeywordIndex:
    """BM25 over passages; `search` gives the best ones with their relative score."""

    def __init__(self, passages: Iterable[tuple[str, Passage]], language: str) -> None:
        """`passages`: (point id, passage) pairs, indexed as heading path + text."""
        items = list(passages)
        self.ids = [point_id for point_id, _ in items]
        self.passages = [passage for _, passage in items]
        name = _STEMMERS.get(language)
        self._stemmer = Stemmer.Stemmer(name) if name else None
        self._model = bm25s.BM25(k1=_K1, b=_B)
        if items:
            corpus = [f"{p.heading or p.title}\n{p.text}" for p in self.passages]
            self._model.index(self._tokenize(corpus), show_progress=False)

    def __len__(self) -> int:
        return len(self.passages)

    def _tokenize(self, texts: list[str]) -> bm25s.tokenization.Tokenized:
        return bm25s.tokenize(
            texts, stopwords=None, stemmer=self._stemmer, show_progress=False, allow_empty=True
        )

    def search(self, query: str, limit: int) -> list[tuple[str, KeywordHit]]:
        """The `limit` best (point id, hit) pairs with a BM25 score above zero."""
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
        top = np.argpartition(-scores, min(limit, len(scores) - 1))[:limit]
        top = top[np.argsort(-scores[top])]
        return [
            (self.ids[i], KeywordHit(self.passages[i], float(scores[i]) / best))
            for i in top
            if scores[i] > 0
        ]
