"""Qdrant Edge as the embedded store: what it keeps on disk, its indexes, the index build
after an ingest, and `kb bench --scale` comparing it with qdrant-client's local mode."""

import json
from pathlib import Path

import pytest
import qdrant_edge as edge
from typer.testing import CliRunner

from app.cli import cli
from knowledge import stores
from knowledge.client import INDEXED_FIELDS, StoreInUse
from knowledge.edge import SHARDS, EdgeStore
from knowledge.ingest import BUILDING_INDEX, CALIBRATING
from knowledge.store import KnowledgeBase
from tests.conftest import SAMPLE_KB
from tests.knowledge.conftest import copy_pages

PAGES = ["gnucash-help-en/trans-reverse.html", "gnucash-guide-de/bus-ar-invoices1.html"]


def test_an_edge_store_keeps_its_passages_indexes_and_stats_across_a_reopen(
    tmp_path: Path,
) -> None:
    folder = copy_pages(PAGES, tmp_path / "manuals")
    kb = KnowledgeBase.open_local(tmp_path / "store", collection="kept")
    try:
        kb.ingest(folder)
        before = kb.stats()
        hit = kb.search("reverse a wrong transaction", 1)[0]
        assert isinstance(kb.knowledge, EdgeStore)
        schema = kb.knowledge.shards["kept"].info().payload_schema
        assert sorted(schema) == sorted(INDEXED_FIELDS)
        assert {info.data_type for info in schema.values()} == {edge.PayloadSchemaType.Keyword}
    finally:
        kb.close()
    config = json.loads((tmp_path / "store" / SHARDS / "kept" / "edge_config.json").read_text())
    # Read in as searches touch them, not the whole preallocated chunk when the shard opens.
    assert config["vectors"]["dense"]["memory"] == "cold"

    again = KnowledgeBase.open_local(tmp_path / "store", collection="kept")
    try:
        assert again.ping()
        assert again.stats() == before
        assert before.chunks_by_language.keys() == {"de", "en"}
        assert again.search("reverse a wrong transaction", 1)[0] == hit
        german_only = again.search("reverse a wrong transaction", 3, language="de")
        assert german_only and {p.source for p in german_only} == {PAGES[1]}
        assert again.ingest(folder).documents_unchanged == 2  # nothing re-embedded
    finally:
        again.close()
    assert not again.ping()


def test_an_ingest_that_changed_passages_builds_the_index_and_says_so(tmp_path: Path) -> None:
    folder = copy_pages(PAGES[:1], tmp_path / "manuals")
    kb = KnowledgeBase.open_local(tmp_path / "store", collection="built")
    steps: list[str] = []
    try:
        kb.ingest(folder, progress=steps.append)
        assert steps == [PAGES[0], BUILDING_INDEX, CALIBRATING]
        steps.clear()
        unchanged = kb.ingest(folder, progress=steps.append)
        assert steps == [PAGES[0]] and unchanged.index_seconds == 0
    finally:
        kb.close()


def test_a_second_process_cannot_open_the_folder_while_one_holds_it(tmp_path: Path) -> None:
    held = stores.open_local(tmp_path / "store")
    try:
        with pytest.raises(StoreInUse):
            stores.open_local(tmp_path / "store")  # the lock is per open file
    finally:
        held.release()
    stores.open_local(tmp_path / "store").release()  # free again once released


def test_kb_bench_scale_puts_both_embedded_stores_side_by_side(tmp_path: Path) -> None:
    output = tmp_path / "scale.json"
    result = CliRunner().invoke(
        cli,
        ["kb", "bench", "--kb-dir", str(SAMPLE_KB), "--scale", "300", "--output", str(output)],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(output.read_text())
    rows = {row["engine"]: row for row in figures["scale"]}
    assert rows.keys() == {"qdrant-local", "edge"}
    assert figures["passages"] < 300
    for row in rows.values():
        assert row["points"] == 300  # the manuals' passages plus generated filler
        assert row["searches"] > 0
        assert row["build_peak_rss_mb"] > 0 and row["serving_peak_rss_mb"] > 0
        assert 0 < row["search_p50_ms"] <= row["search_p95_ms"]
        assert 0 < row["filtered_p50_ms"] <= row["filtered_p95_ms"]


def test_kb_bench_scale_with_an_engine_measures_that_one_only(tmp_path: Path) -> None:
    output = tmp_path / "scale.json"
    arguments = ["--kb-dir", str(SAMPLE_KB), "--scale", "200,300", "--engine", "edge"]
    result = CliRunner().invoke(cli, ["kb", "bench", *arguments, "--output", str(output)])
    assert result.exit_code == 0, result.output
    rows = json.loads(output.read_text())["scale"]
    assert [(row["engine"], row["points"]) for row in rows] == [("edge", 200), ("edge", 300)]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (
            ["--scale", "20k"],
            "--scale '20k': give sizes in points separated by commas, e.g. 20000,100000",
        ),
        (["--engine", "sqlite"], "--engine 'sqlite': edge or qdrant-local"),
    ],
)
def test_kb_bench_names_a_bad_scale_or_engine(option: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["kb", "bench", "--kb-dir", str(SAMPLE_KB), *option])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {message}"
