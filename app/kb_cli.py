"""`supportbot kb …`: ingest folders, sync websites, search, inspect and benchmark the
knowledge base.

A user's mistake (a missing folder, a store another process holds, a collection that does
not exist, a bad setting) is one line on stderr and a non-zero exit, never a traceback.
Settings, Qdrant and the embedders are imported by the commands that use them, so that
`supportbot --help` does not load them. The calibration and the bench commands are
`app/kb_calibrate.py` and `app/kb_bench.py`; what the commands share, `app/kb_support.py`.
"""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from app.kb_support import (
    CollectionOption,
    documents_under,
    fail,
    file_progress,
    ingest_with_progress,
    load_settings,
    open_knowledge_base,
    open_store,
    print_report,
    require_collection,
    rich_console,
    thresholds_line,
)

if TYPE_CHECKING:
    from knowledge.sync import SyncReport

from app.kb_bench import run_bench
from app.kb_calibrate import run_calibrate

app = typer.Typer(help="Knowledge base: ingest documentation, search it, measure it.")


@app.command()
def ingest(
    path: Annotated[Path, typer.Argument(help="folder (or file) of HTML, Markdown and PDF")],
    collection: CollectionOption = None,
) -> None:
    """Mirror a folder into the knowledge base: new and changed files are (re)indexed,
    files that are gone are removed, unchanged files are skipped; then calibrate when "not
    in the docs" starts for the collection. Your first folder replaces the sample
    knowledge base."""
    files = documents_under(path)
    sample = load_settings().knowledge.sample_path
    with open_knowledge_base() as kb:
        replaced = kb.replace_sample(sample, path, collection)
        if replaced:
            rich_console().print(
                f"the sample knowledge base ({replaced.documents} documents) was removed from "
                f"{collection or kb.collection!r}: your documentation replaces it"
            )
        report = ingest_with_progress(kb, path, len(files), collection)
        calibration = kb.calibration(collection)
    print_report(report)
    if calibration:
        rich_console().print(f"calibrated: {thresholds_line(calibration.thresholds)}")
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

    settings = load_settings().knowledge
    with open_knowledge_base() as kb:
        try:
            with file_progress(f"Syncing {url}", None) as progress:
                report = sync_site(
                    kb, url, settings, collection, progress, sample=settings.sample_path
                )
        except ValueError as exc:
            fail(str(exc), 2)
        except SiteUnavailable as exc:
            fail(f"{exc}; {collection or kb.collection!r} is left as it was")
        calibration = kb.calibration(collection)
    _print_sync_report(report)
    if calibration:
        rich_console().print(f"calibrated: {thresholds_line(calibration.thresholds)}")
    if report.ingest.errors:
        raise typer.Exit(1)


def _print_sync_report(report: "SyncReport") -> None:
    console = rich_console()
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
    print_report(report.ingest, "pages")


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
    load_settings()  # a bad setting is told first, as by every command
    if (source is None) == (not everything):
        fail("give a folder or document to remove, or --all", 2)
    with open_knowledge_base() as kb:
        name = collection or kb.collection
        require_collection(kb, name)
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
        fail(
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
    settings = load_settings().knowledge
    if settings.collection != default_collection:
        typer.echo(
            f"sample knowledge base skipped: the configured collection is "
            f"{settings.collection!r} (SUPPORTBOT_KNOWLEDGE__COLLECTION), and the sample "
            f"goes only into the default {default_collection!r}"
        )
        return
    files = documents_under(settings.sample_path, "sample documents")
    with open_knowledge_base() as kb:
        if holds_other_than(kb.knowledge, default_collection, settings.sample_path):
            typer.echo(
                f"sample knowledge base skipped: {default_collection!r} holds your own "
                "documentation (`supportbot kb remove --all` empties it)"
            )
            return
        report = ingest_with_progress(kb, settings.sample_path, len(files), default_collection)
    print_report(report)
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
    console = rich_console()
    with open_knowledge_base() as kb:
        require_collection(kb, collection or kb.collection)
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

    console = rich_console()
    settings = load_settings().knowledge
    try:
        embedder = embedder_name(settings.embedder)
    except ValueError as exc:
        fail(str(exc), 2)
    name = collection or settings.collection
    with open_store() as store:
        require_collection(store, name)
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
        console.print(f"calibration: {thresholds_line(result.calibration)}", highlight=False)
    else:
        console.print("calibration: none yet (`supportbot kb ingest` makes it)")


app.command(name="calibrate")(run_calibrate)
app.command(name="bench")(run_bench)
