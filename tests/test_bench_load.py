"""The load benchmark: its short form against the served app, and how it counts."""

from collections import Counter
from pathlib import Path

import pytest

from app.bench.load import (
    ANSWERED,
    FAILED,
    REFUSED,
    TIMEOUT,
    LoadPlan,
    LoadReport,
    Model,
    SentTurn,
    StoredState,
    analyse,
    question,
    run,
)
from app.db import migrate

SHORT = LoadPlan(
    conversations=8, turns=3, concurrency=8, fail_rate=0.2, model_timeout_seconds=2, seed=3
)


def assert_nothing_lost(report: LoadReport) -> None:
    assert report.sent == 24
    assert report.model_faults.total() > 0  # the provider did fail some calls
    assert report.lost == 0
    assert report.turn_status["running"] == 0
    assert report.order_violations == 0
    assert report.duplicated == 0
    assert report.unreadable == 0


def test_short_load_on_sqlite_loses_nothing(tmp_path: Path, sample_index: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bench.sqlite'}"
    migrate.upgrade(url)

    report = run(SHORT, url, sample_index)

    assert_nothing_lost(report)
    assert report.turn_status.total() == 24


@pytest.mark.postgres
def test_short_load_on_postgres_loses_nothing(own_pg_url: str, sample_index: Path) -> None:
    report = run(SHORT, own_pg_url, sample_index)

    assert_nothing_lost(report)


def sent(key: str, index: int, outcome: str, seconds: float = 1.0) -> SentTurn:
    return SentTurn(key, 0, index, question(0, index), outcome, "-", seconds)


def test_the_read_back_counts_lost_duplicated_and_disordered_messages() -> None:
    turns = [
        sent("a", 0, ANSWERED, 0.5),
        sent("a", 1, FAILED),  # kept, as a 502 says
        sent("a", 2, TIMEOUT),  # never stored: lost
        sent("a", 3, REFUSED),  # refused and not stored: not lost
        sent("b", 0, ANSWERED),
        sent("b", 1, ANSWERED),
    ]
    stored = StoredState(
        user_messages={
            "a": [(1, 1, "Ann: " + question(0, 0)), (4, 2, question(0, 1))],
            # b's second message stored before its first, and its first stored twice
            "b": [(1, 1, question(0, 1)), (3, 2, question(0, 0)), (5, 3, question(0, 0))],
        },
        unreadable={},
        turn_status=Counter({"ok": 4, "failed": 1}),
        model_ms={("a", 1): 200},
        turn_ms={("a", 1): 450.0},
    )

    report = analyse(
        LoadPlan(conversations=2, turns=4),
        turns,
        stored,
        database="sqlite",
        model=Model("m"),
        wall_seconds=1.0,
    )

    assert report.lost == 1
    assert report.duplicated == 1
    assert report.order_violations == 1
    assert report.outcomes == Counter({ANSWERED: 3, FAILED: 1, TIMEOUT: 1, REFUSED: 1})
    assert sorted(report.latency_ms) == [500.0, 1000.0, 1000.0]
    assert 300.0 in report.overhead_ms  # a's first turn: 500 ms less 200 ms in the model
    assert report.outside_turn_ms == [50.0]


def test_a_turn_that_met_a_model_fault_is_left_out_of_the_overhead() -> None:
    turns = [sent("a", 0, ANSWERED), sent("a", 1, ANSWERED)]
    stored = StoredState(
        user_messages={"a": [(1, 1, question(0, 0)), (3, 2, question(0, 1))]}, unreadable={}
    )

    report = analyse(
        LoadPlan(conversations=1, turns=2),
        turns,
        stored,
        database="sqlite",
        model=Model("scripted", faulted={(0, 1)}),
        wall_seconds=1.0,
    )

    assert report.faulted_answers == 1
    assert report.overhead_ms == [1000.0]
    assert len(report.latency_ms) == 2
