"""What a server process loads before its port answers, and what it leaves for the warm-up
after: each check runs in a fresh interpreter, as a server starts (this test process has
imported everything already)."""

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import ROOT


def run_python(code: str, tmp_path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "SUPPORTBOT_DB__URL": f"sqlite:///{tmp_path / 'supportbot.db'}",
            "SUPPORTBOT_KNOWLEDGE__QDRANT_PATH": str(tmp_path / "qdrant"),
            "SUPPORTBOT_KNOWLEDGE__QDRANT_URL": "",
            # The graph built by this test process's embedder, not built again.
            "SUPPORTBOT_KNOWLEDGE__MODEL_CACHE_DIR": str(default_cache()),
        },
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def default_cache() -> Path:
    from knowledge.embeddings import get_embedder
    from knowledge.graph_cache import default_cache_folder

    get_embedder("e5").embed_new_query("built")  # the graph is in the cache folder now
    return default_cache_folder()


def test_the_app_module_leaves_the_html_readers_to_ingestion(tmp_path: Path) -> None:
    loaded = run_python(
        """
        import sys
        import app.api.main
        print(sorted({"bs4", "markdownify", "soupsieve", "pypdf"} & set(sys.modules)))
        """,
        tmp_path,
    )
    assert loaded == "[]"


def test_the_runtime_loads_the_embedder_in_its_warm_up_not_before(tmp_path: Path) -> None:
    """Building the runtime (before the port answers) reads no model; the warm-up (after)
    loads the embedder, so the first turn finds it loaded."""
    stages = run_python(
        """
        import sys
        from app.runtime import Runtime
        from app.settings import Settings

        runtime = Runtime.from_settings(Settings(_env_file=None))
        print("sentencepiece" in sys.modules)
        runtime.warm_up()
        print("sentencepiece" in sys.modules)
        """,
        tmp_path,
    )
    assert stages.splitlines() == ["False", "True"]


def test_loading_without_collection_sets_the_loaded_objects_aside(tmp_path: Path) -> None:
    states = run_python(
        """
        import gc
        from app.loading import loading_without_collection

        with loading_without_collection():
            paused = gc.isenabled()
            import app.api.main
        print(paused, gc.isenabled(), gc.get_freeze_count() > 100_000)
        gc.unfreeze()
        gc.disable()
        with loading_without_collection():
            pass
        print(gc.isenabled(), gc.get_freeze_count())
        """,
        tmp_path,
    )
    assert states.splitlines() == ["False True True", "False 0"]
