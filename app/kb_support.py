"""What the `supportbot kb` commands share: one-line errors for a user's mistakes, the
settings, the store and the knowledge base opened for a command, progress bars, and where
the bench and calibration data live."""

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from app.settings import Settings
    from knowledge.client import KnowledgeClient
    from knowledge.embeddings import Embedder
    from knowledge.ingest import IngestReport
    from knowledge.store import KnowledgeBase

# The store's start-up notice (an old local-mode store) is these commands' own error line;
# without logging configured, Python would also print the logged copy. `serve` configures
# logging, and its handlers still receive it.
logging.getLogger("knowledge.client").addHandler(logging.NullHandler())
DEFAULT_EMBEDDER = "e5"  # knowledge.embeddings.DEFAULT_EMBEDDER, without loading numpy
# Where `make eval-data` copies the GnuCash manuals from Debian's gnucash-docs, under the home.
MANUALS = Path("var") / "manuals"
DEV_SCENARIOS = Path(__file__).resolve().parents[1] / "evals" / "scenarios"

CollectionOption = Annotated[
    str | None, typer.Option(help="collection (default: the configured one)")
]


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@cache
def rich_console() -> "Console":
    from rich.console import Console

    return Console()


def load_settings() -> "Settings":
    from pydantic import ValidationError

    from app.settings import get_settings

    try:
        return get_settings()
    except ValidationError as exc:
        from app.start_up_errors import describe

        lines = describe(exc) or [str(exc)]
        problems = "; ".join(line.removeprefix("invalid settings: ") for line in lines)
        fail(f"invalid settings: {problems}", 2)


def load_embedder(name: str) -> "Embedder":
    from knowledge.embeddings import get_embedder

    try:
        return get_embedder(name, load_settings().knowledge.model_cache_dir)
    except (ValueError, RuntimeError) as exc:  # an unknown name; `use` not installed
        fail(str(exc), 2)


def where_label(location: str) -> str:
    if location.startswith("local:"):
        return f"the local Qdrant store {location.removeprefix('local:')}"
    return f"the Qdrant server {location}"


@contextmanager
def user_errors(location: str) -> Iterator[None]:
    """What goes wrong with a store through no fault of ours, as one line."""
    from knowledge.client import StoreInUse

    try:
        yield
    except StoreInUse as exc:
        fail(
            f"{exc} (a local store admits one process, e.g. a running `supportbot serve`): "
            "stop it, ingest through it (POST /v1/admin/kb/ingest with SUPPORTBOT_ADMIN_TOKEN), "
            "or share a Qdrant server (SUPPORTBOT_KNOWLEDGE__QDRANT_URL)"
        )
    except Exception as exc:
        if "qdrant_client" not in sys.modules:  # only its store raises its errors
            raise
        # Imported here: the embedded store's commands do not load qdrant-client (0.5 s).
        from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

        if isinstance(exc, UnexpectedResponse):
            refused = exc.status_code in (401, 403)
            hint = ": check SUPPORTBOT_KNOWLEDGE__QDRANT_API_KEY" if refused else ""
            fail(f"{where_label(location)} answered {exc.status_code} {exc.reason_phrase}{hint}")
        if isinstance(exc, ResponseHandlingException):
            fail(f"cannot reach {where_label(location)}: {exc}")
        raise


Opened = TypeVar("Opened")


def open_location(location: str, opener: Callable[[], Opened]) -> Opened:
    try:
        return opener()
    except OSError as exc:  # the store's folder is a file, or not writable
        fail(f"cannot open {where_label(location)}: {exc.strerror or exc}")


@contextmanager
def open_knowledge_base() -> Iterator["KnowledgeBase"]:
    from knowledge.client import EmbedderMismatch
    from knowledge.store import KnowledgeBase

    settings = load_settings().knowledge
    load_embedder(settings.embedder)  # a bad name as one line; from_settings reuses the instance
    location = settings.qdrant_url or f"local:{settings.qdrant_path}"
    with user_errors(location):
        kb = open_location(location, lambda: KnowledgeBase.from_settings(settings))
        try:
            yield kb
        except EmbedderMismatch as exc:
            fail(str(exc))
        finally:
            # Before interpreter shutdown: the local client cannot release its lock during it.
            kb.close()


@contextmanager
def open_store() -> Iterator["KnowledgeClient"]:
    """The configured store alone, without an embedder: for what reads payloads only."""
    from knowledge import stores

    settings = load_settings().knowledge
    location = settings.qdrant_url or f"local:{settings.qdrant_path}"
    with user_errors(location):
        store = open_location(location, lambda: stores.acquire(settings))
        try:
            yield store
        finally:
            store.release()


def require_collection(kb: "KnowledgeBase | KnowledgeClient", name: str) -> None:
    from knowledge.calibration.collection import SUFFIX
    from knowledge.client import KnowledgeClient

    store = kb if isinstance(kb, KnowledgeClient) else kb.knowledge
    existing = [found for found in store.collection_names() if not found.endswith(SUFFIX)]
    if name in existing:
        return
    if store.notice:  # e.g. an old local-mode store: say how to move it, not "empty"
        fail(store.notice)
    holds = (
        f"it holds {', '.join(existing)}"
        if existing
        else "it holds none: ingest a folder with `supportbot kb ingest PATH`"
    )
    fail(f"no collection {name!r} in {where_label(kb.location)}; {holds}")


def documents_under(path: Path, what: str = "documents") -> list[Path]:
    """The files to ingest from PATH, or one line saying why there are none."""
    from knowledge.ingest import discover_files
    from knowledge.loaders import SUPPORTED_SUFFIXES

    path = path.resolve()
    if not path.exists():
        fail(f"no such file or folder: {path}", 2)
    if path.is_file() and path.suffix.lower() not in SUPPORTED_SUFFIXES:
        fail(f"{path} is not HTML, Markdown or PDF ({' '.join(SUPPORTED_SUFFIXES)})", 2)
    files = discover_files(path)
    if not files:
        fail(f"no HTML, Markdown or PDF files under {path}: no {what} to ingest", 2)
    return files


class _ProgressBar:
    """A progress bar advanced once per document, whose total may grow (a site's pages
    are listed as its links are followed)."""

    def __init__(self, bar: Any, task: Any) -> None:
        self._bar = bar
        self._task = task

    def __call__(self, source: str) -> None:
        from knowledge.ingest import BUILDING_INDEX, CALIBRATING

        step = 0 if source in (BUILDING_INDEX, CALIBRATING) else 1
        self._bar.update(self._task, advance=step, source=source)

    def listed(self, pages: int) -> None:
        self._bar.update(self._task, total=pages)


@contextmanager
def file_progress(description: str, total: int | None) -> Iterator[_ProgressBar]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[source]}"),
        console=rich_console(),
        transient=True,
    ) as bar:
        yield _ProgressBar(bar, bar.add_task(description, total=total, source=""))


def ingest_with_progress(
    kb: "KnowledgeBase", path: Path, files: int, collection: str | None
) -> "IngestReport":
    with file_progress(f"Ingesting {path.name}", files) as progress:
        return kb.ingest(path, collection, progress=progress)


def print_report(report: "IngestReport", documents: str = "documents") -> None:
    console = rich_console()
    console.print(
        f"[bold]{report.collection}[/]: {documents} +{report.documents_added} "
        f"~{report.documents_updated} -{report.documents_deleted} ={report.documents_unchanged}; "
        f"chunks +{report.chunks_added} -{report.chunks_deleted} ={report.chunks_unchanged}; "
        f"{len(report.skipped)} pages without text skipped; {report.seconds:.1f} s"
    )
    for source, message in report.errors.items():
        console.print(f"[red]error[/] {source}: {message}")


def thresholds_line(thresholds: dict[str, float]) -> str:
    """How `kb ingest` and `kb stats` show a calibration: one threshold per question
    language, "other" for the rest."""
    named = [f"{language or 'other'} {value:.3f}" for language, value in thresholds.items()]
    return "relevant from similarity " + ", ".join(named)
