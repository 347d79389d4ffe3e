"""SIGTERM to the served app (a child process, as `supportbot serve` runs) with a streamed
turn in flight: the stream ends with the turn's answer, and no new connection is taken."""

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from app.bench.load import served, service_environment
from app.bench.scripted_llm import ScriptedLLM
from app.db import migrate


def test_sigterm_lets_a_streamed_turn_finish_with_its_answer(
    tmp_path: Path, sample_index: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'shutdown.sqlite'}"
    migrate.upgrade(database)
    scripted = ScriptedLLM(latency_seconds=2)  # each model call takes 2 s
    with scripted as base_url:
        environment = service_environment(database, sample_index) | {
            "SUPPORTBOT_LLM__MODEL": "scripted",
            "SUPPORTBOT_LLM__BASE_URL": base_url,
            "SUPPORTBOT_LLM__API_KEY": "test",
        }
        with served(environment) as server:
            body = {"audience": "client", "author": "Ann", "text": "How do I create an invoice?"}
            url = f"{server.base_url}/v1/conversations/api:shutdown/messages/stream"
            with httpx.stream("POST", url, json=body, timeout=60) as response:
                assert response.status_code == 200
                deadline = time.monotonic() + 30
                while not scripted.received and time.monotonic() < deadline:
                    time.sleep(0.05)  # until the turn is in flight: the model was called
                assert scripted.received
                os.kill(server.pid, signal.SIGTERM)
                streamed = response.read().decode()
            with pytest.raises(httpx.ConnectError):  # stopped taking connections
                httpx.get(f"{server.base_url}/healthz", timeout=5)
    assert "event: done" in streamed
    assert "From the help center" in streamed  # the scripted provider's answer
    assert len(scripted.received) == 2  # the search call, then the answer
