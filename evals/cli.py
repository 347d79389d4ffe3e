"""`supportbot eval …`: play a scenario under memory profiles and report cost and quality."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from app.agent.memory.profiles import default_profiles
from app.observability.simulator import RULES
from app.settings import get_settings
from evals.harness import EvalConfig, evaluate, open_knowledge
from evals.report import table_cells
from evals.scenario import load_scenario
from knowledge.store import discover_files

app = typer.Typer(help="Evals: memory profiles on recorded conversations.", no_args_is_help=True)
console = Console()
DEFAULT_PROFILES = "baseline,clearing,trim+clear,summary+clear,hybrid,client"


def _search_range(value: str) -> tuple[int, int]:
    fewest, _, most = value.partition("-")
    return int(fewest), int(most or fewest)


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


@app.command()
def run(
    scenario: Annotated[Path, typer.Option(help="scenario YAML (one chat or `chats:`)")],
    out: Annotated[Path, typer.Option(help="folder for report.md, JSON and plots")],
    profiles: Annotated[str, typer.Option(help="comma-separated profiles")] = DEFAULT_PROFILES,
    provider_rules: Annotated[
        str, typer.Option(help=f"prompt-cache rules: {', '.join(RULES)}")
    ] = "gemini",
    price: Annotated[str, typer.Option(help="price-table model the agent is billed as")] = (
        "gemini-3.1-pro"
    ),
    helper_price: Annotated[
        str, typer.Option(help="price-table model the offline summary/expert are billed as")
    ] = "gemini-3-flash",
    kb: Annotated[
        Path | None,
        typer.Option(help="folder ingested into the eval collection (gold paths are relative)"),
    ] = None,
    cache_dir: Annotated[Path, typer.Option(help="the eval index lives here")] = Path(
        "./var/evals"
    ),
    gap_minutes: Annotated[float, typer.Option(help="minutes between turns")] = 0.0,
    repeat: Annotated[int, typer.Option(min=1, help="runs per profile")] = 1,
    seed: Annotated[int, typer.Option(help="seed of the first run; run i uses seed+i")] = 0,
    searches: Annotated[
        str, typer.Option(help="offline model: fewest-most searches per user message")
    ] = "1-3",
    expert_below: Annotated[
        int,
        typer.Option(help="offline model: ask the expert when no passage shares this many words"),
    ] = 2,
    judge: Annotated[
        str | None, typer.Option(help="model that also grades fact coverage (LLM judge)")
    ] = None,
) -> None:
    """Play SCENARIO once per profile through the real ChatService and write the report."""
    names = [name.strip() for name in profiles.split(",") if name.strip()]
    settings = get_settings()
    unknown = [n for n in names if n not in settings.profiles.definitions]
    if unknown:
        console.print(f"[red]unknown profiles {unknown}; defined: {', '.join(default_profiles())}")
        raise typer.Exit(2)
    if provider_rules not in RULES:
        console.print(f"[red]unknown rules {provider_rules!r}: use one of {', '.join(RULES)}")
        raise typer.Exit(2)
    config = EvalConfig(
        scenario=scenario,
        profiles=names,
        out=out,
        provider_rules=provider_rules,
        price=price,
        helper_price=helper_price,
        kb=kb,
        cache_dir=cache_dir,
        gap_minutes=gap_minutes,
        repeat=repeat,
        seed=seed,
        searches_per_question=_search_range(searches),
        ask_expert_below_shared_words=expert_below,
        judge=judge,
    )
    turns = load_scenario(scenario).turn_count * len(names) * repeat
    with _progress() as bar:
        files = len(discover_files(kb.resolve())) if kb else 0
        task = bar.add_task(f"indexing {kb}", total=files)
        knowledge, report = open_knowledge(settings, config, lambda _: bar.advance(task))
        bar.update(task, visible=False)
        try:
            playing = bar.add_task(f"playing {scenario.name}", total=turns)
            result = evaluate(settings, config, knowledge, on_turn=lambda: bar.advance(playing))
        finally:
            knowledge.close()
    if report:
        console.print(
            f"knowledge base: {report.chunks_added} chunks indexed, "
            f"{report.chunks_unchanged} reused ({report.seconds:.0f} s)"
        )
    header, rows = table_cells(result.summaries)
    table = Table(*header, title=f"{result.scenario.name}: memory profiles")
    for cells in rows:
        table.add_row(*cells)
    console.print(table)
    console.print("wrote " + ", ".join(str(path) for path in result.files))
