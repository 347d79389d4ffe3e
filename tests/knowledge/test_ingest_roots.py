"""Remote ingest reads only under the ingest roots (knowledge/roots.py and the admin
endpoint): no `..`, no empty path, no symlink out, no server path in the answer."""

import json
import os
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr

from app.api import admin
from app.api.errors import install_error_handlers
from app.settings import Settings
from knowledge.roots import NotFound, OutsideRoots, read_confined, resolve_ingest_path
from knowledge.store import IngestReport, KnowledgeBase

ADMIN = {"Authorization": "Bearer s3cret"}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    (docs / "en").mkdir(parents=True)
    (docs / "en" / "invoice.md").write_text("# Invoices\n\nHow to send one.\n")
    (tmp_path / "secret.md").write_text("# Secret\n\nthe database password\n")
    return docs


def test_paths_under_a_root_resolve(root: Path) -> None:
    assert resolve_ingest_path(str(root), [root]) == root.resolve()
    assert resolve_ingest_path("en", [root]) == (root / "en").resolve()  # relative: to the root
    assert resolve_ingest_path(str(root / "en" / "invoice.md"), [root]).name == "invoice.md"
    (root / "en" / "alias.md").symlink_to(root / "en" / "invoice.md")  # a link that stays in
    assert resolve_ingest_path(str(root), [root]) == root.resolve()


@pytest.mark.parametrize("requested", ["", " ", "..", "../secret.md", "en/../../secret.md", "/etc"])
def test_paths_outside_the_roots_are_refused(root: Path, requested: str) -> None:
    with pytest.raises(OutsideRoots):
        resolve_ingest_path(requested, [root])


def test_a_missing_path_under_a_root_is_not_found(root: Path) -> None:
    with pytest.raises(NotFound):
        resolve_ingest_path("nowhere", [root])


@pytest.mark.parametrize("target", ["file", "folder", "dangling"])
def test_a_folder_with_a_link_out_is_refused(root: Path, target: str) -> None:
    outside = {
        "file": root.parent / "secret.md",
        "folder": root.parent,
        "dangling": root.parent / "gone",
    }[target]
    (root / "en" / "passwd.md").symlink_to(outside)
    with pytest.raises(OutsideRoots, match="1 link"):
        resolve_ingest_path(str(root), [root])
    # The link itself, asked for by name, resolves outside too.
    with pytest.raises(OutsideRoots):
        resolve_ingest_path(str(root / "en" / "passwd.md"), [root])


def test_no_roots_means_nothing_may_be_read(root: Path) -> None:
    with pytest.raises(OutsideRoots):
        resolve_ingest_path(str(root), [])


class _RecordingBase:
    def __init__(self) -> None:
        self.calls: list[tuple[Path, str | None]] = []

    def ingest(
        self, path: Path, collection: str | None = None, confined_to: Sequence[Path] = ()
    ) -> IngestReport:
        assert confined_to  # the endpoint always reads through the checked descriptor
        self.calls.append((path, collection))
        return IngestReport(collection=collection or "kb", documents_added=1)


def _client(roots: list[Path], recorder: _RecordingBase | KnowledgeBase) -> TestClient:
    api = FastAPI()
    api.include_router(admin.router)
    install_error_handlers(api)
    settings = Settings(admin_token=SecretStr("s3cret"), _env_file=None)
    settings.knowledge.ingest_roots = roots
    api.state.runtime = SimpleNamespace(settings=settings)  # the settings the app reads
    api.dependency_overrides[admin.get_knowledge_base] = lambda: recorder
    return TestClient(api)


def test_the_endpoint_refuses_what_lies_outside_and_echoes_no_path(root: Path) -> None:
    recorder = _RecordingBase()
    client = _client([root], recorder)
    (root / "en" / "passwd.md").symlink_to("/etc/passwd")
    for body, code in [
        ({"path": ""}, 422),
        ({"path": "/etc"}, 403),
        ({"path": str(root)}, 403),  # the link to /etc/passwd inside
        ({"path": str(root / "missing")}, 404),
        ({"path": "bad\x00name"}, 422),
        ('{"path": "\\ud800"}', 422),  # a lone surrogate, as JSON may carry it
        ({"path": str(root / "en" / "invoice.md"), "collection": "../kb"}, 422),
        ({"path": str(root / "en" / "invoice.md"), "collection": "a/b"}, 422),
    ]:
        response = client.post(
            "/v1/admin/kb/ingest",
            content=body if isinstance(body, str) else json.dumps(body),
            headers={**ADMIN, "content-type": "application/json"},
        )
        assert response.status_code == code, (body, response.text)
        detail = response.json()["detail"]
        assert isinstance(detail, str)
        assert str(root) not in detail and "/etc" not in detail
    assert recorder.calls == []

    allowed = {"path": str(root / "en" / "invoice.md"), "collection": "docs-v2"}
    response = client.post("/v1/admin/kb/ingest", json=allowed, headers=ADMIN)
    assert response.status_code == 200, response.text
    assert response.json()["documents_added"] == 1
    assert recorder.calls == [((root / "en" / "invoice.md").resolve(), "docs-v2")]


def test_by_default_only_the_sample_knowledge_base_may_be_ingested(tmp_path: Path) -> None:
    recorder = _RecordingBase()
    client = _client([], recorder)
    sample = Settings(_env_file=None).knowledge.sample_path
    elsewhere = client.post("/v1/admin/kb/ingest", json={"path": str(tmp_path)}, headers=ADMIN)
    assert elsewhere.status_code == 403
    assert client.post("/v1/admin/kb/ingest", json={"path": "."}, headers=ADMIN).status_code == 200
    assert recorder.calls == [(sample.resolve(), None)]


def test_a_hard_link_out_of_the_root_is_not_ingested(root: Path, tmp_path: Path) -> None:
    os.link(root.parent / "secret.md", root / "en" / "passwd.md")  # no symlink to spot
    assert resolve_ingest_path(str(root), [root]) == root.resolve()  # the folder passes
    settings = Settings(_env_file=None)
    knowledge = KnowledgeBase.from_settings(
        settings.knowledge.model_copy(update={"qdrant_path": tmp_path / "index"})
    )
    try:
        client = _client([root], knowledge)
        response = client.post("/v1/admin/kb/ingest", json={"path": str(root)}, headers=ADMIN)
        assert response.status_code == 200, response.text
        report = response.json()
        assert report["errors"] == {
            "en/passwd.md": "refused: a hard link: its other name may lie outside the ingest roots"
        }
        assert report["documents_added"] == 1  # invoice.md alone
        passages = knowledge.search("database password", 5)
        assert all("password" not in passage.text for passage in passages)
    finally:
        knowledge.close()


def test_a_file_is_checked_after_it_is_opened(root: Path, tmp_path: Path) -> None:
    roots = [root.resolve()]
    assert read_confined(root / "en" / "invoice.md", roots).startswith(b"# Invoices")
    # A folder swapped for a link out after the path was checked: the opened file is outside.
    (root / "en").rename(root / "checked")
    (root / "en").symlink_to(tmp_path)
    with pytest.raises(OutsideRoots, match="outside the ingest roots"):
        read_confined(root / "en" / "secret.md", roots)
    with pytest.raises(OSError):  # the last name a symlink: not followed at all
        (root / "checked" / "link.md").symlink_to(root / "checked" / "invoice.md")
        read_confined(root / "checked" / "link.md", roots)
    os.mkfifo(root / "checked" / "pipe.md")
    with pytest.raises(OutsideRoots, match="not a regular file"):
        read_confined(root / "checked" / "pipe.md", roots)
