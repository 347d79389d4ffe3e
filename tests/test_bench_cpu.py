"""`supportbot bench cpu`: what it reads from /proc, how it groups turns, and a short run
against the served app."""

import os
import time
from pathlib import Path

from app.bench.cpu import Configuration, blocks, process_cpu_seconds, resident_mb, run, table_rows
from app.db import migrate


def test_process_cpu_time_counts_work_not_waiting() -> None:
    before = process_cpu_seconds(os.getpid())
    time.sleep(0.2)
    slept = process_cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        pass
    worked = process_cpu_seconds(os.getpid())
    assert slept - before < 0.1
    assert worked - slept >= 0.15
    assert resident_mb(os.getpid()) > 10


def test_turns_are_grouped_as_the_first_then_thirds() -> None:
    assert blocks(20) == [(1, 1), (2, 8), (9, 15), (16, 20)]
    assert blocks(2) == [(1, 1), (2, 2)]
    spans = blocks(7)
    assert spans[0] == (1, 1) and spans[-1][1] == 7
    assert all(a <= b for a, b in spans)
    assert [a for a, _ in spans[1:]] == sorted({a for a, _ in spans[1:]})


def test_a_short_run_measures_each_turn_of_the_served_app(
    tmp_path: Path, sample_index: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'cpu.sqlite'}"
    migrate.upgrade(database)
    # This checkout named as another's source: the server imports the code found there.
    checkout = Path(__file__).resolve().parents[1]
    configuration = Configuration("offline", "sqlite", checkout)
    (figures,) = run([(configuration, database)], sample_index, tmp_path, turns=4)
    assert figures.failed_turns == 0
    assert len(figures.turn_cpu_ms) == 4
    assert sum(figures.turn_cpu_ms) > 0  # the kernel counts in 10 ms ticks: some turn shows
    assert figures.startup_seconds > 0 and figures.startup_rss_mb > 50
    assert figures.ready_seconds >= figures.startup_seconds
    header, rows = table_rows([figures], 4)
    assert len(rows[0]) == len(header)
    assert rows[0][0] == f"offline model, sqlite, {checkout.name}"
    assert Configuration("offline", "sqlite").name == "offline model, sqlite"
