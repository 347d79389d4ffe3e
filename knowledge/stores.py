"""Which engine a store is opened with: Qdrant Edge on a local folder (the default), or
qdrant-client for a Qdrant server and, for comparison in `kb bench --scale`, its local mode.
Each engine's library loads only when its store is opened (qdrant-client's takes 0.5 s and
~40 MB)."""

from pathlib import Path

from knowledge.client import KnowledgeClient, shared
from knowledge.settings import KnowledgeSettings


def acquire(settings: KnowledgeSettings) -> KnowledgeClient:
    """The process's store for the settings' location (opened on first use): a Qdrant
    server when `qdrant_url` is set, Qdrant Edge on `qdrant_path` otherwise. Each
    `acquire` is matched by one `release`."""
    url, api_key = settings.qdrant_url, settings.qdrant_api_key
    if not url:
        path = settings.qdrant_path
        return shared(f"local:{path.resolve()}", lambda: open_local(path))

    def connect() -> KnowledgeClient:
        from knowledge.qdrant_server import QdrantClientStore

        return QdrantClientStore.connect(url, api_key.get_secret_value() if api_key else None)

    return shared(url, connect)


def open_local(path: Path, engine: str = "edge") -> KnowledgeClient:
    """A store of its own on a local folder (not shared through `acquire`): Qdrant Edge,
    or (`engine="qdrant-local"`) qdrant-client's local mode, kept for comparison."""
    if engine == "qdrant-local":
        from knowledge.qdrant_server import QdrantClientStore

        return QdrantClientStore.open_local_mode(path)
    from knowledge.edge import EdgeStore

    return EdgeStore.open(path)
