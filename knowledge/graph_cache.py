"""A built ONNX graph kept on disk, keyed by everything it is built from.

Building and quantizing e5's int8 graph takes 3.5-5 s of CPU on every start; loading the
stored bytes takes a few milliseconds. The file name carries a digest of the key (the
weights' own digest, the builder's settings, the onnx and onnxruntime versions), so a
change to any of them misses and builds anew; a JSON file beside the graph holds the key and
the graph's digest, so a truncated or damaged graph is noticed and rebuilt. The cache is an
optimization only: a folder that cannot be read or written logs a warning and the graph is
built in memory as before.

A name keeps its newest `keep` builds (by last use): one for a graph (43 MB, rebuilt only
when what it is built from changes), a few for small files such as labelled examples'
vectors, which servers with different labelled sets sharing one folder (two revisions
side by side, a rolling upgrade) would otherwise replace at each other's start.
"""

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)


def default_cache_folder() -> Path:
    """$XDG_CACHE_HOME/supportbot, by default ~/.cache/supportbot."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "supportbot"


def file_digest(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


class GraphCache:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def paths(self, name: str, key: Mapping[str, str], suffix: str = ".onnx") -> tuple[Path, Path]:
        """The graph's file and its key file, for this name and key."""
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        stem = f"{name}-{digest}"
        return self.folder / f"{stem}{suffix}", self.folder / f"{stem}.json"

    def get_or_build(
        self,
        name: str,
        key: Mapping[str, str],
        build: Callable[[], bytes],
        suffix: str = ".onnx",
        keep: int = 1,
    ) -> Path | bytes:
        """The stored file, checked whole, for this name and key; else what `build` makes,
        stored for the next time (with the newest `keep` builds of this name): its file, or
        its bytes when they could not be stored. (A file, so that a reader such as
        onnxruntime holds no second copy.)"""
        graph_path, key_path = self.paths(name, key, suffix)
        if self._intact(graph_path, key_path, key):
            with contextlib.suppress(OSError):  # its last use, for `keep`
                os.utime(key_path)
            return graph_path
        graph = build()
        stored = self._write(name, graph, graph_path, key_path, key, keep)
        return graph_path if stored else graph

    def _intact(self, graph_path: Path, key_path: Path, key: Mapping[str, str]) -> bool:
        try:
            recorded = json.loads(key_path.read_text(encoding="utf-8"))
            graph = graph_path.read_bytes()
        except FileNotFoundError:
            return False
        except (OSError, ValueError) as error:
            log.warning("graph cache %s unreadable, building it again: %s", graph_path, error)
            return False
        if not isinstance(recorded, dict) or recorded.get("key") != dict(key):
            log.warning("graph cache %s holds another key, building it again", graph_path)
            return False
        if recorded.get("sha256") != hashlib.sha256(graph).hexdigest():
            log.warning("graph cache %s is damaged, building it again", graph_path)
            return False
        return True

    def _write(
        self,
        name: str,
        graph: bytes,
        graph_path: Path,
        key_path: Path,
        key: Mapping[str, str],
        keep: int,
    ) -> bool:
        record = {"key": dict(key), "sha256": hashlib.sha256(graph).hexdigest()}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # The graph first, its key file last: a reader that finds the key finds the graph.
            _replace_atomically(graph_path, graph)
            _replace_atomically(key_path, json.dumps(record, indent=2).encode())
            self._drop_all_but_newest(name, keep)
        except OSError as error:
            log.warning(
                "cannot store the graph in %s (built again next start): %s", self.folder, error
            )
            return False
        return True

    def _drop_all_but_newest(self, name: str, keep: int) -> None:
        """Remove the builds of `name` beyond the `keep` last used (a key file's time)."""
        last_used: list[tuple[float, Path]] = []
        for key_file in self.folder.glob(f"{name}-*.json"):
            # Another process sharing the folder may have dropped it since the listing.
            with contextlib.suppress(FileNotFoundError):
                last_used.append((key_file.stat().st_mtime, key_file))
        last_used.sort()
        for _, stale in last_used[: max(0, len(last_used) - keep)]:
            for path in self.folder.glob(f"{stale.stem}.*"):
                path.unlink(missing_ok=True)


def _replace_atomically(path: Path, content: bytes) -> None:
    """Write through a temporary file in the same folder and rename it into place, so that
    another process starting at the same time reads the old file or the new, never a part."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(content)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
