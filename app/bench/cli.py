"""`supportbot bench`: the prefix-cache simulator's cost per call, the service under load."""

from typing import Annotated

import typer

app = typer.Typer(help="Benchmarks: the prefix-cache simulator, the service under load.")


@app.command()
def simulator(
    conversations: Annotated[
        list[int] | None, typer.Option(help="conversations in the cache (repeatable)")
    ] = None,
    rules: Annotated[
        str, typer.Option(help="cache rules: openai, anthropic, gemini, block16")
    ] = "gemini",
    calls: Annotated[int, typer.Option(min=1, help="measured calls per row")] = 1_000,
) -> None:
    """Microseconds per simulator call at 10 / 1,000 / 10,000 conversations."""
    from rich.console import Console
    from rich.table import Table

    from app.bench.prefix_cache import Workload, measure
    from app.observability.simulator import RULES

    if rules not in RULES:
        raise typer.BadParameter(f"use one of {', '.join(RULES)}", param_hint="--rules")
    workload = Workload(calls=calls)
    table = Table("conversations", "CPU µs per call", "cached share", "tokens stored")
    for count in conversations or [10, 1_000, 10_000]:
        row = measure(RULES[rules], count, workload)
        table.add_row(
            f"{count:,}",
            f"{row.microseconds_per_call:,.0f}",
            f"{row.cached_share:.1%}",
            f"{row.stored_tokens:,}",
        )
    Console().print(table)
    typer.echo(
        f"{rules} rules; every conversation: {workload.shared_tokens:,} shared tokens, "
        f"{workload.own_tokens:,} of its own, {workload.turn_tokens} more per measured call"
    )
