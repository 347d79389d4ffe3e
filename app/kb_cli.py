"""`supportbot kb …`: ingest folders, sync websites, search, inspect and benchmark the
knowledge base.

A user's mistake (a missing folder, a store another process holds, a collection that does
not exist, a bad setting) is one line on stderr and a non-zero exit, never a traceback.
Settings, Qdrant and the embedders are imported by the commands that use them, so that
`supportbot --help` does not load them. One module: the `kb` command group and the one-line
error handling its commands share.
"""

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from app.settings import KnowledgeSettings, Settings
    from knowledge import bench
    from knowledge.client import KnowledgeClient
    from knowledge.embeddings import Embedder
    from knowledge.ingest import IngestReport
    from knowledge.relevance import Calibration, LabelledQuestion
    from knowledge.store import KnowledgeBase
    from knowledge.sync import SyncReport

app = typer.Typer(help="Knowledge base: ingest documentation, search it, measure it.")
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

# The questions the relevance threshold is chosen on (answerable with their pages, and not).
CALIBRATION_QUESTIONS = DEV_SCENARIOS.parent / "decisions" / "relevance_calibration.yaml"


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@cache
def _console() -> "Console":
    from rich.console import Console

    return Console()


def _settings() -> "Settings":
    from pydantic import ValidationError

    from app.settings import get_settings

    try:
        return get_settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"SUPPORTBOT_{'__'.join(str(part) for part in error['loc']).upper()}: {error['msg']}"
            for error in exc.errors()
        )
        _fail(f"invalid settings: {problems}", 2)


def _embedder(name: str) -> "Embedder":
    from knowledge.embeddings import get_embedder

    try:
        return get_embedder(name, _settings().knowledge.model_cache_dir)
    except (ValueError, RuntimeError) as exc:  # an unknown name; `use` not installed
        _fail(str(exc), 2)


def _where(location: str) -> str:
    if location.startswith("local:"):
        return f"the local Qdrant store {location.removeprefix('local:')}"
    return f"the Qdrant server {location}"


@contextmanager
def _user_errors(location: str) -> Iterator[None]:
    """What goes wrong with a store through no fault of ours, as one line."""
    from knowledge.client import StoreInUse

    try:
        yield
    except StoreInUse as exc:
        _fail(
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
            _fail(f"{_where(location)} answered {exc.status_code} {exc.reason_phrase}{hint}")
        if isinstance(exc, ResponseHandlingException):
            _fail(f"cannot reach {_where(location)}: {exc}")
        raise


Opened = TypeVar("Opened")


def _open(location: str, opener: Callable[[], Opened]) -> Opened:
    try:
        return opener()
    except OSError as exc:  # the store's folder is a file, or not writable
        _fail(f"cannot open {_where(location)}: {exc.strerror or exc}")


@contextmanager
def _knowledge_base() -> Iterator["KnowledgeBase"]:
    from knowledge.client import EmbedderMismatch
    from knowledge.store import KnowledgeBase

    settings = _settings().knowledge
    _embedder(settings.embedder)  # a bad name as one line; from_settings reuses the instance
    location = settings.qdrant_url or f"local:{settings.qdrant_path}"
    with _user_errors(location):
        kb = _open(location, lambda: KnowledgeBase.from_settings(settings))
        try:
            yield kb
        except EmbedderMismatch as exc:
            _fail(str(exc))
        finally:
            # Before interpreter shutdown: the local client cannot release its lock during it.
            kb.close()


@contextmanager
def _store() -> Iterator["KnowledgeClient"]:
    """The configured store alone, without an embedder: for what reads payloads only."""
    from knowledge import stores

    settings = _settings().knowledge
    location = settings.qdrant_url or f"local:{settings.qdrant_path}"
    with _user_errors(location):
        store = _open(location, lambda: stores.acquire(settings))
        try:
            yield store
        finally:
            store.release()


def _require_collection(kb: "KnowledgeBase | KnowledgeClient", name: str) -> None:
    from knowledge.calibration.collection import SUFFIX
    from knowledge.client import KnowledgeClient

    store = kb if isinstance(kb, KnowledgeClient) else kb.knowledge
    existing = [found for found in store.collection_names() if not found.endswith(SUFFIX)]
    if name in existing:
        return
    if store.notice:  # e.g. an old local-mode store: say how to move it, not "empty"
        _fail(store.notice)
    holds = (
        f"it holds {', '.join(existing)}"
        if existing
        else "it holds none: ingest a folder with `supportbot kb ingest PATH`"
    )
    _fail(f"no collection {name!r} in {_where(kb.location)}; {holds}")


def _documents(path: Path, what: str = "documents") -> list[Path]:
    """The files to ingest from PATH, or one line saying why there are none."""
    from knowledge.ingest import discover_files
    from knowledge.loaders import SUPPORTED_SUFFIXES

    path = path.resolve()
    if not path.exists():
        _fail(f"no such file or folder: {path}", 2)
    if path.is_file() and path.suffix.lower() not in SUPPORTED_SUFFIXES:
        _fail(f"{path} is not HTML, Markdown or PDF ({' '.join(SUPPORTED_SUFFIXES)})", 2)
    files = discover_files(path)
    if not files:
        _fail(f"no HTML, Markdown or PDF files under {path}: no {what} to ingest", 2)
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
def _file_progress(description: str, total: int | None) -> Iterator[_ProgressBar]:
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
        console=_console(),
        transient=True,
    ) as bar:
        yield _ProgressBar(bar, bar.add_task(description, total=total, source=""))


def _ingest_with_progress(
    kb: "KnowledgeBase", path: Path, files: int, collection: str | None
) -> "IngestReport":
    with _file_progress(f"Ingesting {path.name}", files) as progress:
        return kb.ingest(path, collection, progress=progress)


def _print_report(report: "IngestReport", documents: str = "documents") -> None:
    console = _console()
    console.print(
        f"[bold]{report.collection}[/]: {documents} +{report.documents_added} "
        f"~{report.documents_updated} -{report.documents_deleted} ={report.documents_unchanged}; "
        f"chunks +{report.chunks_added} -{report.chunks_deleted} ={report.chunks_unchanged}; "
        f"{len(report.skipped)} pages without text skipped; {report.seconds:.1f} s"
    )
    for source, message in report.errors.items():
        console.print(f"[red]error[/] {source}: {message}")


@app.command()
def ingest(
    path: Annotated[Path, typer.Argument(help="folder (or file) of HTML, Markdown and PDF")],
    collection: CollectionOption = None,
) -> None:
    """Mirror a folder into the knowledge base: new and changed files are (re)indexed,
    files that are gone are removed, unchanged files are skipped; then calibrate when "not
    in the docs" starts for the collection. Your first folder replaces the sample
    knowledge base."""
    files = _documents(path)
    sample = _settings().knowledge.sample_path
    with _knowledge_base() as kb:
        replaced = kb.replace_sample(sample, path, collection)
        if replaced:
            _console().print(
                f"the sample knowledge base ({replaced.documents} documents) was removed from "
                f"{collection or kb.collection!r}: your documentation replaces it"
            )
        report = _ingest_with_progress(kb, path, len(files), collection)
        calibration = kb.calibration(collection)
    _print_report(report)
    if calibration:
        _console().print(f"calibrated: {_thresholds(calibration.thresholds)}")
    if report.errors:
        raise typer.Exit(1)


@app.command()
def sync(
    url: Annotated[
        str,
        typer.Argument(
            help="the help center: its start page or folder (https://help.example.com/docs/), "
            "or its sitemap.xml",
            show_default=False,
        ),
    ],
    collection: CollectionOption = None,
) -> None:
    """Mirror a website into the knowledge base: the pages its sitemap lists (or, without
    one, those linked from the start page) under the URL's folder, as robots.txt allows;
    new and changed pages are (re)indexed, pages that are gone or no longer listed are
    removed, unchanged ones are not downloaded again (conditional GET); then calibrate.
    Citations link to the pages."""
    from knowledge.sync import SiteUnavailable, sync_site

    settings = _settings().knowledge
    with _knowledge_base() as kb:
        try:
            with _file_progress(f"Syncing {url}", None) as progress:
                report = sync_site(
                    kb, url, settings, collection, progress, sample=settings.sample_path
                )
        except ValueError as exc:
            _fail(str(exc), 2)
        except SiteUnavailable as exc:
            _fail(f"{exc}; {collection or kb.collection!r} is left as it was")
        calibration = kb.calibration(collection)
    _print_sync_report(report)
    if calibration:
        _console().print(f"calibrated: {_thresholds(calibration.thresholds)}")
    if report.ingest.errors:
        raise typer.Exit(1)


def _print_sync_report(report: "SyncReport") -> None:
    console = _console()
    if report.replaced_sample:
        console.print(
            f"the sample knowledge base ({report.replaced_sample.documents} documents) was "
            f"removed from {report.ingest.collection!r}: your documentation replaces it"
        )
    console.print(
        f"{report.site}: {report.listed} pages listed by {report.listed_by}; "
        f"{report.not_modified} not modified (304), {report.gone} gone (404/410), "
        f"{report.disallowed} disallowed by robots.txt",
        highlight=False,
        soft_wrap=True,
    )
    for url, what in report.not_documents.items():
        console.print(f"not a document: {url}: {what}", highlight=False, soft_wrap=True)
    _print_report(report.ingest, "pages")


def _thresholds(thresholds: dict[str, float]) -> str:
    """How `kb ingest` and `kb stats` show a calibration: one threshold per question
    language, "other" for the rest."""
    named = [f"{language or 'other'} {value:.3f}" for language, value in thresholds.items()]
    return "relevant from similarity " + ", ".join(named)


@app.command()
def remove(
    source: Annotated[
        str | None,
        typer.Argument(
            help="an ingested folder or synced site, or a document's path inside it or a "
            "page's URL (`kb stats` lists the folders and sites)",
            show_default=False,
        ),
    ] = None,
    everything: Annotated[
        bool, typer.Option("--all", help="remove every document of the collection")
    ] = False,
    collection: CollectionOption = None,
) -> None:
    """Take an ingested folder or synced site, or one document, out of the knowledge base
    (or --all), and calibrate what is left."""
    _settings()  # a bad setting is told first, as by every command
    if (source is None) == (not everything):
        _fail("give a folder or document to remove, or --all", 2)
    with _knowledge_base() as kb:
        name = collection or kb.collection
        _require_collection(kb, name)
        if everything:
            removed = kb.remove(name)
        else:
            assert source is not None
            # A synced site's root and pages are URLs, taken as they are.
            website = source.startswith(("https://", "http://"))
            folder = source if website else str(Path(source).expanduser().resolve())
            from knowledge.sources import documents_by_root

            if folder in documents_by_root(kb.knowledge, name):
                removed = kb.remove(name, root=folder)
            else:
                removed = kb.remove(name, source=source if website else Path(source).as_posix())
    if not removed.documents:
        _fail(
            f"nothing ingested from {source!r} in {name!r}: `supportbot kb stats` lists the folders"
        )
    typer.echo(f"{name}: documents -{removed.documents}; chunks -{removed.chunks}")


@app.command("ingest-sample")
def ingest_sample() -> None:
    """Ingest the sample knowledge base (SUPPORTBOT_KNOWLEDGE__SAMPLE_PATH) into the default
    collection; skipped when another collection is configured or the default one holds
    documents of your own, so that the sample never mixes with them."""
    from app.settings import KnowledgeSettings
    from knowledge.sources import holds_other_than

    default_collection: str = KnowledgeSettings.model_fields["collection"].default
    settings = _settings().knowledge
    if settings.collection != default_collection:
        typer.echo(
            f"sample knowledge base skipped: the configured collection is "
            f"{settings.collection!r} (SUPPORTBOT_KNOWLEDGE__COLLECTION), and the sample "
            f"goes only into the default {default_collection!r}"
        )
        return
    files = _documents(settings.sample_path, "sample documents")
    with _knowledge_base() as kb:
        if holds_other_than(kb.knowledge, default_collection, settings.sample_path):
            typer.echo(
                f"sample knowledge base skipped: {default_collection!r} holds your own "
                "documentation (`supportbot kb remove --all` empties it)"
            )
            return
        report = _ingest_with_progress(kb, settings.sample_path, len(files), default_collection)
    _print_report(report)
    if report.errors:
        raise typer.Exit(1)


@app.command()
def search(
    query: str,
    collection: CollectionOption = None,
    k: Annotated[int, typer.Option("--k", min=1, help="passages to return")] = 5,
    language: Annotated[str | None, typer.Option(help="only passages in this language")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON list of hits")] = False,
) -> None:
    """Search the knowledge base."""
    console = _console()
    with _knowledge_base() as kb:
        _require_collection(kb, collection or kb.collection)
        passages = kb.search(query, k, collection=collection, language=language)
    if as_json:
        hits = [
            {
                "source": p.source,
                "title": p.title,
                "heading": p.heading,
                "score": p.score,
                "similarity": p.similarity,
                "text": p.text,
            }
            for p in passages
        ]
        typer.echo(json.dumps(hits, ensure_ascii=False, indent=2))
        return
    if not passages:
        console.print("no passages found")
    for number, passage in enumerate(passages, start=1):
        console.print(
            f"[bold]{number}. {passage.heading}[/]  {passage.source}  ({passage.score:.3f})"
        )
        console.print(passage.text[:300].replace("\n", " "), highlight=False, soft_wrap=True)


@app.command()
def stats(
    collection: CollectionOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Documents and chunks in a collection, by language, and where the store is."""
    from knowledge.embeddings import embedder_name
    from knowledge.stats import collection_stats

    console = _console()
    settings = _settings().knowledge
    try:
        embedder = embedder_name(settings.embedder)
    except ValueError as exc:
        _fail(str(exc), 2)
    name = collection or settings.collection
    with _store() as store:
        _require_collection(store, name)
        result = collection_stats(store, name, embedder=embedder, hybrid=settings.hybrid)
    configured = settings.configured_min_similarity
    if as_json:
        typer.echo(
            json.dumps(result.as_dict() | {"min_similarity_configured": configured}, indent=2)
        )
        return
    for key in ("collection", "location", "embedder", "hybrid", "documents", "chunks"):
        console.print(f"{key}: {getattr(result, key)}", highlight=False)
    languages = ", ".join(f"{lang} {count}" for lang, count in result.chunks_by_language.items())
    console.print(f"chunks by language: {languages}", highlight=False)
    for folder, documents in result.documents_by_folder.items():
        console.print(f"folder: {folder} ({documents} documents)", highlight=False, soft_wrap=True)
    if configured:
        console.print("calibration: SUPPORTBOT_KNOWLEDGE__MIN_SIMILARITY is set and is used")
    elif result.calibration:
        console.print(f"calibration: {_thresholds(result.calibration)}", highlight=False)
    else:
        console.print("calibration: none yet (`supportbot kb ingest` makes it)")


@app.command(name="calibrate")
def run_calibrate(
    questions: Annotated[
        list[Path],
        typer.Option(
            help="YAML of questions labelled `docs: answerable | unanswerable`; repeat for "
            "several (default: evals/decisions/relevance_calibration.yaml)"
        ),
    ] = [CALIBRATION_QUESTIONS],  # noqa: B006 - typer reads the default, never mutates it
    max_refused: Annotated[
        float, typer.Option(min=0, max=1, help="share of answerable questions it may refuse")
    ] = 0.05,
    scope: Annotated[
        bool,
        typer.Option(
            help="also fit the documentation's scope to the questions (knowledge/scope.py): "
            "the thresholds then take 40% of MAX_REFUSED, the scope's cut the rest"
        ),
    ] = False,
    by_set: Annotated[
        bool,
        typer.Option(
            help="with --scope: instead, hold each questions file out in turn, choose the "
            "thresholds and the cut on the others and report what they do on it (how the "
            "scope's neighbours were chosen)"
        ),
    ] = False,
    neighbours: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="with --by-set: the nearest questions of each kind compared (default: the "
            "service's, knowledge/scope.py)",
        ),
    ] = None,
) -> None:
    """Choose the relevance thresholds of the configured embedder on the configured
    collection: per query language with enough answerable questions, and over all of them,
    the highest similarity that refuses at most MAX_REFUSED of the answerable questions;
    with --scope, the scope's cut as well. Prints the settings to use."""
    if by_set and not (scope and len(questions) > 1):
        _fail("--by-set holds each questions file out in turn: give --scope and two or more", 2)
    from knowledge.relevance import (
        best_similarity,
        calibrate_by_language,
        load_questions,
    )
    from knowledge.scope import NEIGHBOURS, THRESHOLDS_SHARE, documentation_scope

    console = _console()
    knowledge = _settings().knowledge
    read = [(path, question) for path in questions for question in load_questions(path)]
    labelled = [question for _, question in read]
    with _knowledge_base() as kb:
        _require_collection(kb, kb.collection)
        scored = [(question, best_similarity(kb, question.text)) for question in labelled]
        # The scope's own vectors, kept where the service's scope finds them.
        fitted = knowledge.model_copy(update={"scope_questions": questions})
        scoped = documentation_scope(fitted, kb.embedder) if scope else None
        vectors = scoped.vectors() if scoped else None
    embedder = knowledge.embedder
    thresholds_share = max_refused * (THRESHOLDS_SHARE if scope else 1.0)
    if by_set and vectors is not None:
        files = [path for path, _ in read]
        _print_scope_by_set(
            console, files, scored, vectors, knowledge, max_refused, neighbours or NEIGHBOURS
        )
        return
    by_language = calibrate_by_language(scored, thresholds_share)
    setting = _similarity_setting(embedder, by_language)
    for key, chosen in zip(setting, by_language.values(), strict=True):
        console.print(
            f"{key}: threshold {chosen.threshold:.3f} refuses {chosen.refused} of "
            f"{chosen.answerable} answerable questions ({chosen.refused_share:.0%}) and tells "
            f'{chosen.caught} of {chosen.unanswerable} unanswerable ones "not in the docs" '
            f"({chosen.caught_share:.0%})"
        )
    console.print(
        f"SUPPORTBOT_KNOWLEDGE__MIN_SIMILARITY='{json.dumps(setting)}'",
        highlight=False,
        soft_wrap=True,
    )
    if vectors is not None:
        thresholds = knowledge.model_copy(update={"min_similarity": setting})
        _print_scope(console, questions, scored, vectors, thresholds, max_refused)


def _print_scope(
    console: "Console",
    questions: list[Path],
    scored: "list[tuple[LabelledQuestion, float]]",
    vectors: Any,
    knowledge: "KnowledgeSettings",
    max_refused: float,
) -> None:
    """The scope's cut beside the thresholds just chosen (`knowledge.min_similarity`), and
    the settings to use."""
    from knowledge.scope import FOLDS, calibrate_scope

    thresholds = knowledge.relevance_thresholds
    answerable = [question.answerable for question, _ in scored]
    refused_anyway = [best < thresholds.for_query(question.text) for question, best in scored]
    chosen = calibrate_scope(vectors, answerable, refused_anyway, max_refused)
    console.print(
        f"scope: cut {chosen.cut:.3f}; with the thresholds, held out in {FOLDS} folds, refuses "
        f"{chosen.refused} of {chosen.answerable} answerable questions and tells "
        f'{chosen.caught} of {chosen.unanswerable} unanswerable ones "not in the docs"'
    )
    files = json.dumps([str(path) for path in questions])
    console.print(
        f"SUPPORTBOT_KNOWLEDGE__SCOPE_QUESTIONS='{files}'", highlight=False, soft_wrap=True
    )
    console.print(
        f"SUPPORTBOT_KNOWLEDGE__SCOPE_CUT={chosen.cut:.3f}", highlight=False, soft_wrap=True
    )


def _similarity_setting(embedder: str, chosen: "dict[str, Calibration]") -> dict[str, float]:
    """The thresholds chosen per language as `SUPPORTBOT_KNOWLEDGE__MIN_SIMILARITY` holds
    them: the embedder's own over every language, `embedder:language` for each language."""
    from knowledge.relevance import ANY_LANGUAGE

    return {
        (f"{embedder}:{language}" if language != ANY_LANGUAGE else embedder): round(
            calibration.threshold, 3
        )
        for language, calibration in chosen.items()
    }


def _print_scope_by_set(
    console: "Console",
    files: list[Path],
    scored: "list[tuple[LabelledQuestion, float]]",
    vectors: Any,
    knowledge: "KnowledgeSettings",
    max_refused: float,
    neighbours: int,
) -> None:
    """Each file held out in turn: the thresholds and the cut chosen on the other files as
    `kb calibrate --scope` chooses them, then applied to the file's questions."""
    import numpy as np
    from rich.table import Table

    from knowledge.relevance import calibrate_by_language
    from knowledge.scope import THRESHOLDS_SHARE, NearestQuestions, calibrate_scope

    held_files = np.array([str(path) for path in files])
    answerable = np.array([question.answerable for question, _ in scored])
    table = Table(
        "held out", "cut", "answerable refused", '"not in the docs"', title="scope, by set"
    )
    totals = np.zeros(4, dtype=int)
    for name in dict.fromkeys(held_files):
        held = held_files == name
        others = [pair for pair, kept in zip(scored, ~held, strict=True) if kept]
        chosen = calibrate_by_language(others, max_refused * THRESHOLDS_SHARE)
        setting = _similarity_setting(knowledge.embedder, chosen)
        thresholds = knowledge.model_copy(update={"min_similarity": setting}).relevance_thresholds
        below = np.array([best < thresholds.for_query(q.text) for q, best in scored])
        cut = calibrate_scope(
            vectors[~held], answerable[~held], below[~held], max_refused, neighbours
        ).cut
        nearest = NearestQuestions(vectors[~held], answerable[~held], neighbours)
        refused = below[held] | (nearest.margins(vectors[held]) > cut)
        covered = answerable[held]
        counts = np.array(
            [(refused & covered).sum(), covered.sum(), (refused & ~covered).sum(), (~covered).sum()]
        )
        totals += counts
        table.add_row(Path(name).name, f"{cut:.3f}", *_shares(counts))
    table.add_row("all", "", *_shares(totals))
    console.print(table)


def _shares(counts: Any) -> list[str]:
    refused, answerable, caught, unanswerable = (int(count) for count in counts)
    return [
        f"{refused}/{answerable} ({refused / max(answerable, 1):.1%})",
        f"{caught}/{unanswerable} ({caught / max(unanswerable, 1):.1%})",
    ]


@app.command(name="bench")
def run_bench(
    kb_dir: Annotated[
        Path | None,
        typer.Option(
            help="the GnuCash manuals, where the gold paths start (default: var/manuals "
            "under SUPPORTBOT_HOME, which `make eval-data` fills)"
        ),
    ] = None,
    evals_dir: Annotated[Path, typer.Option(help="the dev conversations")] = DEV_SCENARIOS,
    embedder: Annotated[str, typer.Option(help="e5, e5-float or use")] = DEFAULT_EMBEDDER,
    qdrant_path: Annotated[
        Path | None, typer.Option(help="local store to (re)use; a temporary one by default")
    ] = None,
    language: Annotated[
        str, typer.Option(help="search only passages in this language ('': all, as the service)")
    ] = "",
    output: Annotated[Path | None, typer.Option(help="also write the figures as JSON")] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            help="the embedded store: edge (Qdrant Edge, the default) or qdrant-local "
            "(qdrant-client's local mode, for comparison); with --scale, only that one"
        ),
    ] = None,
    scale: Annotated[
        str,
        typer.Option(
            help="instead of retrieval: sizes in points, e.g. 20000,100000 - the manuals plus "
            "generated filler in qdrant-client's local mode and in Qdrant Edge, side by side"
        ),
    ] = "",
) -> None:
    """Ingest KB_DIR into a local store (time, chunks, peak memory), then score retrieval on
    the dev conversations, the held-out and the translated questions, dense alone, fused
    with BM25 and with Qdrant's sparse BM25, and time searches; or (--scale) time the
    embedded stores at larger sizes."""
    from knowledge import bench
    from knowledge.client import EmbedderMismatch
    from knowledge.store import KnowledgeBase

    settings = _settings()
    kb_dir = kb_dir or settings.home / MANUALS
    if not kb_dir.exists():
        _fail(
            f"no manuals at {kb_dir.resolve()}: run `make eval-data` (copies them from Debian's "
            "gnucash-docs) or give their folder with --kb-dir, e.g. /usr/share/doc/gnucash-docs",
            2,
        )
    if not kb_dir.is_dir():
        _fail(f"--kb-dir {kb_dir.resolve()} is a file: give the folder of the manuals", 2)
    files = _documents(kb_dir, "manuals")
    missing = [name for name in bench.EVAL_FILES if not (evals_dir / name).is_file()]
    if missing:
        found = f"{', '.join(missing)} in {evals_dir.resolve()}"
        _fail(f"no dev conversations {found} (--evals-dir)", 2)
    if output and not output.resolve().parent.is_dir():
        _fail(f"no folder {output.resolve().parent} to write --output into", 2)
    try:
        sizes = [int(size) for size in scale.replace("_", "").split(",") if size.strip()]
    except ValueError:
        _fail(f"--scale {scale!r}: give sizes in points separated by commas, e.g. 20000,100000", 2)
    if engine not in (None, "edge", "qdrant-local"):
        _fail(f"--engine {engine!r}: edge or qdrant-local", 2)
    knowledge = settings.knowledge
    chosen = _embedder(embedder)
    with TemporaryDirectory(prefix="kb-bench-") as temporary:
        store = (qdrant_path or Path(temporary)).resolve()
        location = f"local:{store}"
        with _user_errors(location):
            kb = _open(
                location,
                lambda: KnowledgeBase.open_local(
                    store,
                    collection="bench",
                    embedder=chosen,
                    engine="edge" if sizes else engine or "edge",
                    language=knowledge.language,
                    keyword_weight=knowledge.keyword_weight,
                    static_weight=knowledge.static_weight,
                    chunk_tokens=knowledge.chunk_tokens,
                    min_chunk_tokens=knowledge.min_chunk_tokens,
                    embed_tokens=knowledge.embed_tokens,
                ),
            )
            try:
                figures = (
                    _scale_bench(kb, kb_dir, files, evals_dir, sizes, engine, Path(temporary))
                    if sizes
                    else _bench(kb, kb_dir, len(files), evals_dir, language, knowledge.top_k)
                )
            except EmbedderMismatch as exc:  # a --qdrant-path another embedder filled
                _fail(str(exc))
            finally:
                kb.close()
    if output:
        output.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n")


def _scale_bench(
    kb: "KnowledgeBase",
    kb_dir: Path,
    files: list[Path],
    evals_dir: Path,
    sizes: list[int],
    engine: str | None,
    work: Path,
) -> dict[str, Any]:
    from rich.table import Table

    from knowledge import bench, scale
    from knowledge.edge import EdgeStore

    console = _console()
    if not isinstance(kb.knowledge, EdgeStore):  # pragma: no cover - open_local makes one
        _fail("--scale reads the manuals' passages out of a Qdrant Edge store")
    with _file_progress("Ingesting", len(files)) as progress:
        measured = bench.measure_ingest(kb, kb_dir, progress=progress)
    _print_report(measured.report)
    passages = scale.passages_of(kb.knowledge, kb.collection)
    queries = [
        [float(x) for x in kb.embedder.embed_query(query.text)]
        for query in bench.load_eval_queries(evals_dir, "turn")
    ]
    console.print(
        f"{len(passages)} passages of the manuals, {len(queries)} dev questions as searches "
        f"of {scale.SEARCH_LIMIT}; each store and size built, then searched, in processes "
        "of their own"
    )
    columns = (
        "engine",
        "points",
        "upsert s",
        "optimize s",
        "search p50/p95 ms",
        "filtered p50/p95 ms",
        "peak RSS MB: build / serve",
    )
    table = Table(*columns)

    def report(figures: "scale.ScaleFigures") -> None:
        console.print(figures.as_dict())
        table.add_row(
            figures.engine,
            f"{figures.points:,}",
            f"{figures.upsert_seconds:.1f}",
            f"{figures.optimize_seconds:.1f}",
            f"{figures.search_p50_ms:.2f} / {figures.search_p95_ms:.2f}",
            f"{figures.filtered_p50_ms:.2f} / {figures.filtered_p95_ms:.2f}",
            f"{figures.build_peak_rss_mb:.0f} / {figures.serving_peak_rss_mb:.0f}",
        )

    engines = (engine,) if engine else scale.ENGINES
    results = scale.run(passages, queries, sizes, work, engines, report)
    console.print(table)
    return {
        "embedder": kb.embedder.name,
        "passages": len(passages),
        "scale": [figures.as_dict() for figures in results],
    }


def _query_sets(evals_dir: Path) -> dict[str, list["bench.EvalQuery"]]:
    from knowledge import bench

    staff = (bench.STAFF_CHATS,)
    return {
        "dev, turn text": bench.load_eval_queries(evals_dir, "turn"),
        "dev, with context": bench.load_eval_queries(evals_dir, "with-context"),
        "dev, offline model's query": bench.load_eval_queries(evals_dir, "offline"),
        "staff chats, turn text": bench.load_eval_queries(evals_dir, "turn", staff),
        "staff chats, with context": bench.load_eval_queries(evals_dir, "with-context", staff),
        "staff chats, offline model's query": bench.load_eval_queries(evals_dir, "offline", staff),
        "held-out en": bench.load_heldout_queries("en"),
        "held-out en, second set": bench.load_heldout_queries(
            "en", path=bench.SECOND_HELDOUT_QUERIES
        ),
        "held-out ru, as asked": bench.load_heldout_queries("ru"),
        "held-out de, as asked": bench.load_heldout_queries("de"),
        "held-out ru, searched in English": bench.load_heldout_queries("ru", as_english=True),
        "held-out de, searched in English": bench.load_heldout_queries("de", as_english=True),
        **{
            f"held-out {language}{part}, as a chat model searched (run {run})": (
                bench.load_heldout_queries(language, model_run=run, path=path)
            )
            for language, part, path in (
                ("en", "", bench.HELDOUT_QUERIES),
                ("en", ", second set", bench.SECOND_HELDOUT_QUERIES),
                ("ru", "", bench.HELDOUT_QUERIES),
                ("de", "", bench.HELDOUT_QUERIES),
            )
            for run in bench.MODEL_RUNS
        },
        "dev translated ru+de, as asked": bench.load_translated_queries(),
    }


def _bench(
    kb: "KnowledgeBase", kb_dir: Path, files: int, evals_dir: Path, language: str, top_k: int
) -> dict[str, Any]:
    import resource

    from rich.table import Table

    from knowledge import bench

    console = _console()
    with _file_progress("Ingesting", files) as progress:
        measured = bench.measure_ingest(kb, kb_dir, progress=progress)
    _print_report(measured.report)
    stats = kb.stats()
    figures: dict[str, Any] = {
        "embedder": kb.embedder.name,
        "ingest": {
            "documents": stats.documents,
            "chunks": stats.chunks,
            "chunks_by_language": stats.chunks_by_language,
            "seconds": round(measured.seconds, 1),
            "cpu_seconds": round(measured.cpu_seconds, 1),
            "peak_rss_mb": round(measured.peak_rss_mb),
        },
        "retrieval": {},
        "latency_ms": {},
    }
    console.print(f"ingest: {figures['ingest']}")
    query_sets = _query_sets(evals_dir)
    words, static = kb.keyword_weight, kb.static_weight
    modes = {
        "dense": kb.with_options(keyword_weight=0.0, static_weight=0.0),
        f"+ {words} BM25": kb.with_options(static_weight=0.0),
        f"+ {words} BM25 + {static} WordLlama": kb,
        "Qdrant's sparse BM25, RRF": kb.with_options(
            hybrid=True, keyword_weight=0.0, static_weight=0.0
        ),
    }
    table = Table("queries", "mode", "n", "hit@1", "hit@5", "MRR@10")
    for name, queries in query_sets.items():
        for mode, searched in modes.items():
            scores = bench.score_retrieval(searched, queries, language=language or None)
            figures["retrieval"][f"{mode} · {name}"] = scores.as_dict()
            table.add_row(
                name,
                mode,
                str(scores.queries),
                f"{scores.hit_at_1:.3f}",
                f"{scores.hit_at_5:.3f}",
                f"{scores.mrr:.3f}",
            )
    console.print(table)
    texts = [query.text for query in query_sets["dev, turn text"]]
    for mode, searched in modes.items():
        latency = bench.measure_latency(searched, texts, top_k, language=language or None)
        figures["latency_ms"][mode] = latency.as_dict()
        console.print(f"latency ({mode}, k={top_k}): {latency.as_dict()}")
    # ru_maxrss: the process's peak, in KiB on Linux (embedder, ingest, BM25 index).
    figures["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    console.print(f"peak RSS: {figures['peak_rss_mb']} MB")
    return figures
