"""The eval's output: report.md (the table), summary.json, turns.json and PNG plots."""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from evals.metrics import TurnRow, row_dicts

PLOTS = {
    "context_tokens.png": ("context_tokens", "context tokens sent at the turn's start"),
    "cumulative_cost.png": ("cumulative_cost_usd", "cumulative cost (USD)"),
    "cached_share.png": ("cached_share", "cached share of the turn's input tokens"),
}


def _tokens(value: float) -> str:
    return f"{value / 1000:.1f}K"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def table_cells(summaries: dict[str, dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The table's header and one row of cells per profile."""
    source = {s["cache_source"] for s in summaries.values()}
    cached = "cached share" + (" (simulated)" if source == {"simulated"} else " (provider)")
    header = [
        "profile",
        "context at last turn",
        "input tokens",
        cached,
        "cost",
        "agent / summary / expert",
        "× lower bound",
        "× baseline",
        "tool calls (searches)",
        "re-searches (on return turns)",
        "gold-page hits",
        "constraint at probes",
        "fact coverage",
        "prefix changes",
    ]
    rows = []
    for name, s in summaries.items():
        cost = f"${s['cost_usd']:.3f}"
        if s["repeats"] > 1:
            cost += f" (${s['cost_usd_min']:.3f}–{s['cost_usd_max']:.3f})"
        judged = s["judged_fact_coverage"]
        rows.append(
            [
                name,
                _tokens(s["context_tokens_last"]),
                _tokens(s["input_tokens"]),
                _percent(s["cached_share"]),
                cost,
                f"${s['cost_agent_usd']:.3f} / {s['cost_summary_usd']:.3f} / "
                f"{s['cost_expert_usd']:.3f}",
                _ratio(s["cost_vs_lower_bound"]),
                _ratio(s.get("cost_vs_baseline")),
                f"{s['tool_calls']:.0f} ({s['searches']:.0f})",
                f"{s['re_searches']:.0f} ({s['return_re_searches']:.0f})",
                _percent(s["gold_hit_rate"]),
                _percent(s["constraint_kept"]),
                _percent(s["fact_coverage"])
                + (f" (judged {_percent(judged)})" if judged is not None else ""),
                f"{s['prefix_changes']:.0f}",
            ]
        )
    return header, rows


def markdown_table(summaries: dict[str, dict[str, Any]]) -> str:
    header, rows = table_cells(summaries)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def write_report(
    out: Path,
    title: str,
    setup: Sequence[str],
    summaries: dict[str, dict[str, Any]],
    rows: Sequence[TurnRow],
) -> list[Path]:
    """Writes every output file into `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    report = out / "report.md"
    notes = "\n".join(f"- {line}" for line in setup)
    report.write_text(f"# {title}\n\n{notes}\n\n{markdown_table(summaries)}\n", encoding="utf-8")
    summary_json = out / "summary.json"
    summary_json.write_text(json.dumps(summaries, indent=2), encoding="utf-8")
    turns_json = out / "turns.json"
    turns_json.write_text(
        json.dumps(row_dicts(rows), indent=1, ensure_ascii=False), encoding="utf-8"
    )
    return [report, summary_json, turns_json, *plot(out, title, rows)]


def plot(out: Path, title: str, rows: Sequence[TurnRow]) -> list[Path]:
    """One line per profile (its first run), one file per measure."""
    first_runs = [r for r in rows if r.repeat == 0]
    profiles = list(dict.fromkeys(r.profile for r in first_runs))
    paths = []
    for filename, (measure, label) in PLOTS.items():
        figure, axes = plt.subplots(figsize=(9, 5))
        for profile in profiles:
            mine = [r for r in first_runs if r.profile == profile]
            axes.plot([r.step for r in mine], [getattr(r, measure) for r in mine], label=profile)
        axes.set_xlabel("turn")
        axes.set_ylabel(label)
        axes.set_title(title)
        axes.grid(alpha=0.3)
        axes.legend()
        figure.tight_layout()
        path = out / filename
        figure.savefig(path, dpi=110)
        plt.close(figure)
        paths.append(path)
    return paths
