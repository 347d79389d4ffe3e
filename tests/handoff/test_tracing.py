"""The Langfuse tag `handoff` on the turn that opened a handoff and on turns answered
during one (/ask), through the app against the local Langfuse endpoint."""

import uuid
from pathlib import Path

from sqlalchemy import create_engine, select

from app.db.engine import sync_url
from app.db.models import Turn
from app.settings import LangfuseSettings, Settings
from tests.conftest import make_client
from tests.observability.conftest import LocalServer, exported_spans

KEY = "api:acme:traced"


def test_turns_of_a_handoff_are_tagged(
    settings: Settings, sample_index: Path, local_server: LocalServer
) -> None:
    settings.langfuse = LangfuseSettings(
        public_key=f"pk-lf-{uuid.uuid4().hex}", secret_key="sk-lf-test", base_url=local_server.url
    )
    with make_client(settings, sample_index) as client:
        for text in (
            "Will it rain in Oslo tomorrow?",
            "Who won the chess final?",
            "/ask invoices?",
        ):
            turn = {"audience": "client", "author": "Ann", "text": text}
            assert client.post(f"/v1/conversations/{KEY}/messages", json=turn).status_code == 200
    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        traces = list(connection.scalars(select(Turn.trace_id).order_by(Turn.number)))
    engine.dispose()

    tagged = {
        span["trace_id"]
        for span in exported_spans(local_server)
        if "handoff" in span.get("langfuse.trace.tags", [])
    }
    assert tagged == {traces[1], traces[2]}  # not the first: no handoff yet
