"""A bad file is reported by name and does not stop the ingestion of the others."""

from pathlib import Path

from knowledge.embeddings import get_embedder
from knowledge.store import KnowledgeBase


def test_corrupt_and_empty_files_are_reported_and_the_rest_is_ingested(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Backups\n\nGnuCash keeps timestamped backup files.\n")
    (docs / "empty.md").write_text("")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4\n this is not a PDF at all")
    (docs / "binary.html").write_bytes(b"\x00\x01\x02<html>\x00")
    kb = KnowledgeBase.open_local(tmp_path / "qdrant", embedder=get_embedder())
    try:
        report = kb.ingest(docs)
        assert set(report.errors) == {"empty.md", "broken.pdf", "binary.html"}
        assert report.errors["empty.md"] == "the file is empty"
        assert "PDF" in report.errors["broken.pdf"]
        assert report.documents_added == 1
        assert kb.search("timestamped backup files", 1)[0].source == "good.md"
    finally:
        kb.close()


def test_missing_folder_is_an_error(tmp_path: Path) -> None:
    kb = KnowledgeBase.open_local(tmp_path / "qdrant")
    try:
        try:
            kb.ingest(tmp_path / "nowhere")
        except FileNotFoundError as exc:
            assert "nowhere" in str(exc)
        else:
            raise AssertionError("expected FileNotFoundError")
    finally:
        kb.close()


def test_a_page_left_with_nothing_to_index_loses_its_passages(tmp_path: Path) -> None:
    """A page that is now links only (its text moved elsewhere) is skipped and its old
    passages go; a page that cannot be read keeps its own until it can."""
    docs = tmp_path / "docs"
    docs.mkdir()
    page = (
        "<html><body><h1>Backups</h1><p>GnuCash keeps timestamped backup files.</p>{}</body></html>"
    )
    (docs / "backups.html").write_text(page.format(""))
    (docs / "reports.md").write_text("# Reports\n\nReports are saved as HTML or PDF.\n")
    kb = KnowledgeBase.open_local(tmp_path / "qdrant", embedder=get_embedder())
    try:
        kb.ingest(docs)
        (docs / "backups.html").write_text(
            '<html><body><p><a href="b.html">Backups</a></p></body></html>'
        )
        (docs / "reports.md").write_bytes(b"\x00\x01 not text")
        report = kb.ingest(docs)
        assert set(report.skipped) == {"backups.html"}
        assert set(report.errors) == {"reports.md"}
        assert report.documents_deleted == 1
        sources = {passage.source for passage in kb.search("backup files and reports", 5)}
        assert sources == {"reports.md"}
    finally:
        kb.close()
