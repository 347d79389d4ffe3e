"""`supportbot kb …`: ingest folders, search, inspect and benchmark the knowledge base."""

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from app.settings import get_settings
from knowledge import bench
from knowledge.embeddings import DEFAULT_EMBEDDER, get_embedder
from knowledge.store import IngestReport, KnowledgeBase, ProgressCallback, discover_files

app = typer.Typer(help="Knowledge base: ingest documentation, search it, measure it.")
console = Console()
SHARED_DIR = Path(__file__).resolve().parents[1] / ".." / "shared"

CollectionOption = Annotated[
    str | None, typer.Option(help="collection (default: the configured one)")
]


@contextmanager
def _knowledge_base() -> Iterator[KnowledgeBase]:
    kb = KnowledgeBase.from_settings(get_settings().knowledge)
    try:
        yield kb
    finally:
        # Before interpreter shutdown: the local client cannot release its lock during it.
        kb.close()


@contextmanager
def _file_progress(description: str, total: int) -> Iterator[ProgressCallback]:
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[source]}"),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total, source="")
        yield lambda source: bar.update(task, advance=1, source=source)


def _ingest_with_progress(kb: KnowledgeBase, path: Path, collection: str | None) -> IngestReport:
    with _file_progress(f"Ingesting {path.name}", len(discover_files(path.resolve()))) as progress:
        return kb.ingest(path, collection, progress=progress)


def _print_report(report: IngestReport) -> None:
    console.print(
        f"[bold]{report.collection}[/]: documents +{report.documents_added} "
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
    files that are gone are removed, unchanged files are skipped."""
    if not path.exists():
        console.print(f"[red]no such file or folder: {path}")
        raise typer.Exit(2)
    with _knowledge_base() as kb:
        report = _ingest_with_progress(kb, path, collection)
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
    with _knowledge_base() as kb:
        passages = kb.search(query, k, collection=collection, language=language)
    if as_json:
        hits = [
            {
                "source": p.source,
                "title": p.title,
                "heading": p.heading,
                "score": p.score,
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
        console.print(passage.text[:300].replace("\n", " "), highlight=False)


@app.command()
def stats(
    collection: CollectionOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Documents and chunks in a collection, by language."""
    with _knowledge_base() as kb:
        result = kb.stats(collection)
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2))
        return
    for key, value in result.as_dict().items():
        console.print(f"{key}: {value}")


@app.command(name="bench")
def run_bench(
    kb_dir: Annotated[Path, typer.Option(help="documentation to ingest")] = SHARED_DIR
    / "kb"
    / "gnucash",
    evals_dir: Annotated[Path, typer.Option(help="dev conversations")] = SHARED_DIR / "evals",
    embedder: Annotated[str, typer.Option(help="e5 or use")] = DEFAULT_EMBEDDER,
    qdrant_path: Annotated[
        Path | None, typer.Option(help="local store to (re)use; a temporary one by default")
    ] = None,
    language: Annotated[str, typer.Option(help="language of the manuals searched")] = "en",
    output: Annotated[Path | None, typer.Option(help="also write the figures as JSON")] = None,
) -> None:
    """Ingest KB_DIR into a local store (time, chunks, peak memory), then score retrieval on
    the dev conversations and the translated questions, dense and hybrid, and time searches."""
    settings = get_settings().knowledge
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as temporary:
        kb = KnowledgeBase.open_local(
            qdrant_path or Path(temporary),
            collection="bench",
            embedder=get_embedder(embedder),
            chunk_tokens=settings.chunk_tokens,
            min_chunk_tokens=settings.min_chunk_tokens,
            embed_tokens=settings.embed_tokens,
        )
        try:
            figures = _bench(kb, kb_dir, evals_dir, language, settings.top_k)
        finally:
            kb.close()
    if output:
        output.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n")


def _bench(
    kb: KnowledgeBase, kb_dir: Path, evals_dir: Path, language: str, top_k: int
) -> dict[str, Any]:
    with _file_progress("Ingesting", len(discover_files(kb_dir.resolve()))) as progress:
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
    }
    console.print(f"ingest: {figures['ingest']}")
    query_sets = {
        "dev, turn text": bench.load_eval_queries(evals_dir, "turn"),
        "dev, followups with context": bench.load_eval_queries(evals_dir, "with-context"),
        "translated ru+de": bench.load_translated_queries(),
    }
    table = Table("mode", "queries", "hit@1", "hit@5", "MRR@10")
    for hybrid in (False, True):
        kb.hybrid = hybrid
        for name, queries in query_sets.items():
            mode = f"{'hybrid' if hybrid else 'dense'} · {name}"
            scores = bench.score_retrieval(kb, queries, language=language)
            figures["retrieval"][mode] = scores.as_dict()
            table.add_row(
                mode,
                str(scores.queries),
                f"{scores.hit_at_1:.3f}",
                f"{scores.hit_at_5:.3f}",
                f"{scores.mrr:.3f}",
            )
    console.print(table)
    texts = [query.text for query in query_sets["dev, turn text"]]
    # Local mode evaluates payload filters in Python: time searches with and without one.
    for hybrid in (False, True):
        kb.hybrid = hybrid
        for filtered in (True, False):
            latency = bench.measure_latency(
                kb, texts, top_k, language=language if filtered else None
            )
            mode = f"{'hybrid' if hybrid else 'dense'}, {language if filtered else 'no'} filter"
            figures.setdefault("latency_ms", {})[mode] = latency.as_dict()
            console.print(f"latency ({mode}, k={top_k}): {latency.as_dict()}")
    return figures
