"""BM25 keyword vectors for Qdrant's sparse index (Qdrant applies the IDF at query time).

Terms are lower-cased words hashed into 31 bits; a document term's weight is BM25's
saturated term frequency, a query term's weight is 1.
"""

import re
import zlib
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qdrant_client import models

_WORD = re.compile(r"\w\w+", re.UNICODE)
_K1 = 1.2
_B = 0.75
# Chunks are cut to a token budget, so their lengths vary little; a fixed average lets a
# document's vector be computed without knowing the rest of the collection.
_AVERAGE_WORDS = 180


def _term_ids(text: str) -> list[int]:
    return [zlib.crc32(word.encode()) & 0x7FFFFFFF for word in _WORD.findall(text.lower())]


def document_vector(text: str) -> "models.SparseVector":
    from qdrant_client import models  # ingest's: a search without `hybrid` needs none

    counts = Counter(_term_ids(text))
    length_norm = 1 - _B + _B * sum(counts.values()) / _AVERAGE_WORDS
    return models.SparseVector(
        indices=list(counts),
        values=[tf * (_K1 + 1) / (tf + _K1 * length_norm) for tf in counts.values()],
    )


def query_vector(text: str) -> "models.SparseVector":
    from qdrant_client import models

    terms = sorted(set(_term_ids(text)))
    return models.SparseVector(indices=terms, values=[1.0] * len(terms))
