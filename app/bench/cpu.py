"""`supportbot bench cpu`: the server's own CPU time per turn, its start-up time and memory,
for several configurations side by side in one run.

Every configuration (the offline model or the scripted OpenAI-compatible provider, on
SQLite or PostgreSQL, this checkout's code or another's) is a server process of its own
(`app.bench.load.served`), started one after another so that each start-up is timed alone
(to the first answer of /healthz, and of /readyz, which waits for the start-up's loading;
the resident memory is read then).
Then the turns go round-robin, one turn in flight at a time across all servers: turn 1 of
every configuration, then turn 2, ... so that a change in the machine's load touches every
configuration alike. A turn's cost is the server process's CPU time (user + system, all
threads, from /proc/<pid>/stat) from just before the request to its answer; the figures are
means over blocks of turns, because the kernel counts CPU time in ticks of 10 ms. The load
generator and the scripted provider run in this process and are not counted.
"""

import os
import shutil
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from app.bench.load import QUESTIONS, Server, served, service_environment

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, every thread's (ended ones included)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        # The command name (field 2) may hold spaces; the fields after it are plain numbers.
        fields = stat.read().rsplit(")", 1)[1].split()
    user, system = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (user + system) / CLOCK_TICKS


def resident_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * PAGE_BYTES / 2**20


@dataclass(frozen=True)
class Configuration:
    model: str  # "offline" or "scripted"
    database: str  # "sqlite" or "postgresql"
    source: Path | None = None  # another checkout whose code the server runs (None: this one)

    @property
    def name(self) -> str:
        revision = f", {self.source.name}" if self.source else ""
        return f"{self.model} model, {self.database}{revision}"


@dataclass
class Figures:
    configuration: Configuration
    startup_seconds: float  # to /healthz
    ready_seconds: float  # to /readyz
    startup_rss_mb: float  # once ready
    turn_cpu_ms: list[float] = field(default_factory=list)
    failed_turns: int = 0
    end_rss_mb: float = 0.0

    def mean_ms(self, first: int, last: int) -> float:
        """Mean CPU ms of turns `first`..`last` (1-based, inclusive)."""
        block = self.turn_cpu_ms[first - 1 : last]
        return statistics.fmean(block) if block else float("nan")


def blocks(turns: int) -> list[tuple[int, int]]:
    """Turn 1 alone (the first turn), then the rest in blocks of about a third."""
    if turns < 2:
        return [(1, turns)]
    step = max(1, (turns - 1 + 2) // 3)
    edges = list(range(2, turns + 1, step))
    return [(1, 1)] + [(start, min(start + step - 1, turns)) for start in edges]


def table_rows(figures: list[Figures], turns: int) -> tuple[list[str], list[list[str]]]:
    spans = blocks(turns)
    header = [
        "configuration",
        "start-up s",
        "ready s",
        "RSS after start MB",
        *(f"CPU ms, turn {a}" if a == b else f"CPU ms, turns {a}-{b}" for a, b in spans),
        f"CPU ms, turns 2-{turns}",
        "RSS at end MB",
        "failed turns",
    ]
    rows = [
        [
            item.configuration.name,
            f"{item.startup_seconds:.2f}",
            f"{item.ready_seconds:.2f}",
            f"{item.startup_rss_mb:.0f}",
            *(f"{item.mean_ms(a, b):.1f}" for a, b in spans),
            f"{item.mean_ms(2, turns):.1f}",
            f"{item.end_rss_mb:.0f}",
            str(item.failed_turns),
        ]
        for item in figures
    ]
    return header, rows


@contextmanager
def _scripted_provider(environment: dict[str, str]) -> Iterator[None]:
    from app.bench.scripted_llm import ScriptedLLM

    with ScriptedLLM() as base_url:
        environment.update(
            {
                "SUPPORTBOT_LLM__MODEL": "scripted",
                "SUPPORTBOT_LLM__BASE_URL": base_url,
                "SUPPORTBOT_LLM__API_KEY": "bench",
            }
        )
        yield


def run(
    configurations: list[tuple[Configuration, str]],
    index: Path,
    scratch: Path,
    turns: int,
    graph_cache: Path | None = None,
) -> list[Figures]:
    """`configurations`: each with its migrated database's URL; `index` an ingested local
    Qdrant folder (copied for each server: a local store admits one process)."""
    servers: list[tuple[Server, Figures]] = []
    with ExitStack() as stack:
        for number, (configuration, database_url) in enumerate(configurations):
            copy = scratch / f"qdrant-{number}"
            shutil.copytree(index, copy)
            environment = service_environment(database_url, copy)
            if graph_cache is not None:
                environment["SUPPORTBOT_KNOWLEDGE__MODEL_CACHE_DIR"] = str(graph_cache)
            if configuration.model == "scripted":
                stack.enter_context(_scripted_provider(environment))
            server = stack.enter_context(served(environment, source=configuration.source))
            figures = Figures(
                configuration,
                server.startup_seconds,
                server.ready_seconds,
                resident_mb(server.pid),
            )
            servers.append((server, figures))
        keys = {server.pid: f"api:cpu-{uuid.uuid4().hex[:8]}" for server, _ in servers}
        with httpx.Client(timeout=120) as client:
            for turn in range(turns):
                for server, figures in servers:
                    body = {
                        "audience": "client",
                        "author": "bench user",
                        # Numbered, so that no turn finds its text in a cache (the
                        # query embedding, token counts) an earlier turn filled.
                        "text": f"{QUESTIONS[turn % len(QUESTIONS)]} (question {turn + 1})",
                    }
                    url = f"{server.base_url}/v1/conversations/{keys[server.pid]}/messages"
                    before = process_cpu_seconds(server.pid)
                    response = client.post(url, json=body)
                    figures.turn_cpu_ms.append((process_cpu_seconds(server.pid) - before) * 1000)
                    figures.failed_turns += response.status_code != 200
        time.sleep(0.5)  # work a turn left for after its answer is counted in the RSS only
        for server, figures in servers:
            figures.end_rss_mb = resident_mb(server.pid)
    return [figures for _, figures in servers]
