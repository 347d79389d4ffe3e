"""`supportbot kb` commands and the admin ingestion endpoint."""

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr
from typer.testing import CliRunner

from app import kb_calibrate
from app import kb_cli as cli
from app.api import admin
from app.settings import Settings
from knowledge.store import IngestReport, KnowledgeBase


@pytest.fixture
def cli_base(
    monkeypatch: pytest.MonkeyPatch, knowledge_base: KnowledgeBase, first_ingest: IngestReport
) -> KnowledgeBase:
    for commands in (cli, kb_calibrate):
        opened = lambda: contextlib.nullcontext(knowledge_base)  # noqa: E731
        monkeypatch.setattr(commands, "open_knowledge_base", opened)
    # `stats` reads the store alone, without loading an embedder.
    monkeypatch.setattr(cli, "open_store", lambda: contextlib.nullcontext(knowledge_base.knowledge))
    return knowledge_base


def test_search_json_lists_hits_with_source_title_heading_scores_text(
    cli_base: KnowledgeBase,
) -> None:
    result = CliRunner().invoke(
        cli.app, ["search", "reconcile with a bank statement", "--json", "--k", "3"]
    )
    assert result.exit_code == 0, result.output
    hits = json.loads(result.output)
    assert len(hits) == 3
    assert set(hits[0]) == {"source", "title", "heading", "score", "similarity", "text"}
    assert hits[0]["source"] == "gnucash-help-en/acct-reconcile.html"
    assert hits[0]["score"] > hits[0]["similarity"] > 0  # BM25 and WordLlama fused in


def test_stats_and_reingest_from_the_command_line(
    cli_base: KnowledgeBase, gnucash_subset: Path
) -> None:
    runner = CliRunner()
    arguments = ["stats", "--json", "--collection", cli_base.collection]
    stats = json.loads(runner.invoke(cli.app, arguments).output)
    assert stats["documents"] >= 7 and stats["chunks_by_language"]["en"] == stats["chunks"]
    result = runner.invoke(cli.app, ["ingest", str(gnucash_subset)])
    assert result.exit_code == 0, result.output
    assert "documents +0 ~0 -0" in result.output


class _RecordingBase:
    def __init__(self) -> None:
        self.calls: list[tuple[Path, str | None]] = []

    def ingest(
        self, path: Path, collection: str | None = None, confined_to: Sequence[Path] = ()
    ) -> IngestReport:
        self.calls.append((path, collection))
        return IngestReport(collection=collection or "kb", documents_added=2)


def _admin_client(
    token: str | None, recorder: _RecordingBase, ingest_roots: list[Path] | None = None
) -> TestClient:
    api = FastAPI()
    api.include_router(admin.router)
    settings = Settings(admin_token=SecretStr(token) if token else None)
    settings.knowledge.ingest_roots = ingest_roots or []
    api.state.runtime = SimpleNamespace(settings=settings)  # the settings the app reads
    api.dependency_overrides[admin.get_knowledge_base] = lambda: recorder
    return TestClient(api)


def test_admin_ingest_needs_the_admin_token(tmp_path: Path) -> None:
    recorder = _RecordingBase()
    body = {"path": str(tmp_path), "collection": "docs"}
    assert _admin_client(None, recorder).post("/v1/admin/kb/ingest", json=body).status_code == 503
    client = _admin_client("s3cret", recorder, ingest_roots=[tmp_path])
    assert client.post("/v1/admin/kb/ingest", json=body).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert client.post("/v1/admin/kb/ingest", json=body, headers=wrong).status_code == 403
    assert recorder.calls == []

    right = {"Authorization": "Bearer s3cret"}
    response = client.post("/v1/admin/kb/ingest", json=body, headers=right)
    assert response.status_code == 200
    assert response.json()["documents_added"] == 2
    assert recorder.calls == [(tmp_path.resolve(), "docs")]
    missing = {"path": str(tmp_path / "nowhere")}
    assert client.post("/v1/admin/kb/ingest", json=missing, headers=right).status_code == 404


def test_calibrate_prints_the_thresholds_and_with_scope_the_scopes_settings(
    cli_base: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    questions = Path(__file__).with_name("scope_questions.yaml")
    settings = Settings(_env_file=None)
    settings.knowledge.model_cache_dir = tmp_path
    monkeypatch.setattr(kb_calibrate, "load_settings", lambda: settings)
    runner = CliRunner()

    plain = runner.invoke(cli.app, ["calibrate", "--questions", str(questions)])
    assert plain.exit_code == 0, plain.output
    assert "SUPPORTBOT_KNOWLEDGE__MIN_SIMILARITY=" in plain.output
    assert "SCOPE" not in plain.output
    assert not list(tmp_path.glob("scope-questions*"))  # nothing embedded for a scope

    # 20 answerable questions: at the default 5% the scope may refuse none of them, and a
    # threshold that refuses one held out (the vectors' last digits differ between CPUs)
    # leaves it no cut at all.
    scoped = runner.invoke(
        cli.app,
        ["calibrate", "--scope", "--max-refused", "0.2", "--questions", str(questions)],
    )
    assert scoped.exit_code == 0, scoped.output
    assert f"SUPPORTBOT_KNOWLEDGE__SCOPE_QUESTIONS='[\"{questions}\"]'" in scoped.output
    cut = float(scoped.output.split("SUPPORTBOT_KNOWLEDGE__SCOPE_CUT=")[1].split()[0])
    assert -1 < cut < 1  # a margin between two cosines
    # The questions' vectors are kept where the service's scope looks for them.
    assert len(list(tmp_path.glob("scope-questions*.npy"))) == 1


def test_calibrate_by_set_holds_each_questions_file_out_in_turn(
    cli_base: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    labelled = yaml.safe_load(Path(__file__).with_name("scope_questions.yaml").read_text())
    halves = [tmp_path / "first.yaml", tmp_path / "second.yaml"]
    for number, path in enumerate(halves):
        path.write_text(yaml.safe_dump({"questions": labelled["questions"][number::2]}))
    settings = Settings(_env_file=None)
    settings.knowledge.model_cache_dir = tmp_path
    monkeypatch.setattr(kb_calibrate, "load_settings", lambda: settings)
    files = [argument for path in halves for argument in ("--questions", str(path))]
    runner = CliRunner()

    by_set = runner.invoke(cli.app, ["calibrate", "--scope", "--by-set", *files])
    assert by_set.exit_code == 0, by_set.output
    rows = {line.split("│")[1].strip(): line for line in by_set.output.splitlines() if "│" in line}
    assert {"first.yaml", "second.yaml", "all"} <= rows.keys()
    answerable = sum(item["docs"] == "answerable" for item in labelled["questions"])
    assert f"/{answerable} (" in rows["all"]  # every answerable question, held out once
    assert "SUPPORTBOT_KNOWLEDGE__SCOPE_CUT" not in by_set.output  # a report, not settings

    alone = runner.invoke(cli.app, ["calibrate", "--by-set", *files])
    assert alone.exit_code == 2 and "--scope" in alone.output
