"""A real embedder that counts the texts it is asked to embed as passages."""

from typing import Any

from knowledge.embeddings import DEFAULT_EMBEDDER, get_embedder


class CountingEmbedder:
    """The embedder `name` (e5 by default), counting the passages it is given."""

    def __init__(self, name: str = DEFAULT_EMBEDDER) -> None:
        self._embedder = get_embedder(name)
        self.name = self._embedder.name
        self.dimension = self._embedder.dimension
        self.passages: list[str] = []

    def embed_query(self, text: str) -> Any:
        return self._embedder.embed_query(text)

    def embed_new_query(self, text: str) -> Any:
        return self._embedder.embed_new_query(text)

    def embed_passages(self, texts: list[str]) -> Any:
        self.passages += texts
        return self._embedder.embed_passages(texts)
