"""`supportbot bench simulator`: the workload it measures and the table it prints."""

from typer.testing import CliRunner

from app.bench.prefix_cache import Workload, measure
from app.cli import cli
from app.observability.simulator import GEMINI


def test_the_workload_shares_one_prefix_and_hits_the_cache() -> None:
    workload = Workload(shared_tokens=5_000, own_tokens=300, turn_tokens=20, calls=40)

    row = measure(GEMINI, 25, workload)

    # The shared prefix is stored once; each call extends its conversation's history.
    assert row.stored_tokens == 5_000 + 25 * 300 + 40 * 20
    assert row.cached_share > 0.95
    assert row.microseconds_per_call > 0


def test_the_command_prints_a_row_per_conversation_count() -> None:
    result = CliRunner().invoke(
        cli, ["bench", "simulator", "--conversations", "3", "--conversations", "7", "--calls", "5"]
    )

    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("│")]
    assert [row.split("│")[1].strip() for row in rows] == ["3", "7"]
