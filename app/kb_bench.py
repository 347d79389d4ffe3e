"""`supportbot kb bench`: retrieval and latency figures on a folder of the manuals and
the question sets of evals/, and the embedded store at scale."""

import json
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.kb_support import (
    DEFAULT_EMBEDDER,
    DEV_SCENARIOS,
    MANUALS,
    documents_under,
    fail,
    file_progress,
    load_embedder,
    load_settings,
    open_location,
    print_report,
    rich_console,
    user_errors,
)

if TYPE_CHECKING:
    from knowledge import bench
    from knowledge.store import KnowledgeBase


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

    settings = load_settings()
    kb_dir = kb_dir or settings.home / MANUALS
    if not kb_dir.exists():
        fail(
            f"no manuals at {kb_dir.resolve()}: run `make eval-data` (copies them from Debian's "
            "gnucash-docs) or give their folder with --kb-dir, e.g. /usr/share/doc/gnucash-docs",
            2,
        )
    if not kb_dir.is_dir():
        fail(f"--kb-dir {kb_dir.resolve()} is a file: give the folder of the manuals", 2)
    files = documents_under(kb_dir, "manuals")
    missing = [name for name in bench.EVAL_FILES if not (evals_dir / name).is_file()]
    if missing:
        found = f"{', '.join(missing)} in {evals_dir.resolve()}"
        fail(f"no dev conversations {found} (--evals-dir)", 2)
    if output and not output.resolve().parent.is_dir():
        fail(f"no folder {output.resolve().parent} to write --output into", 2)
    try:
        sizes = [int(size) for size in scale.replace("_", "").split(",") if size.strip()]
    except ValueError:
        fail(f"--scale {scale!r}: give sizes in points separated by commas, e.g. 20000,100000", 2)
    if engine not in (None, "edge", "qdrant-local"):
        fail(f"--engine {engine!r}: edge or qdrant-local", 2)
    knowledge = settings.knowledge
    chosen = load_embedder(embedder)
    with TemporaryDirectory(prefix="kb-bench-") as temporary:
        store = (qdrant_path or Path(temporary)).resolve()
        location = f"local:{store}"
        with user_errors(location):
            kb = open_location(
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
                fail(str(exc))
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

    console = rich_console()
    if not isinstance(kb.knowledge, EdgeStore):  # pragma: no cover - open_local makes one
        fail("--scale reads the manuals' passages out of a Qdrant Edge store")
    with file_progress("Ingesting", len(files)) as progress:
        measured = bench.measure_ingest(kb, kb_dir, progress=progress)
    print_report(measured.report)
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

    console = rich_console()
    with file_progress("Ingesting", files) as progress:
        measured = bench.measure_ingest(kb, kb_dir, progress=progress)
    print_report(measured.report)
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
