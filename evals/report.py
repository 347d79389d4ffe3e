"""The eval's output: report.md (the table), summary.json, turns.json and PNG plots."""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from evals.metrics import TurnRow, row_dicts
from evals.profiles import MEMORY_OFF, context_profile, peer_profiles

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
        "× baseline",
        "× lower bound",
        "× strict bound",
        "prefix breaks: turns / calls",
        "tool calls (searches, re-searches)",
        "gold-page hits",
        "constraint at probes",
        "probes kept",
        "fact coverage",
    ]
    rows = []
    for name, s in summaries.items():
        cost = f"${s['cost_usd']:.3f}"
        if s["repeats"] > 1:
            cost += f" (${s['cost_usd_min']:.3f}–{s['cost_usd_max']:.3f})"
        judged = s["judged_fact_coverage"]
        probes = "—" if s["probes_kept"] is None else f"{s['probes_kept']:.0%} of {s['probes']:.0f}"
        rows.append(
            [
                name,
                _tokens(s["context_tokens_last"]),
                _tokens(s["input_tokens"]),
                _percent(s["cached_share"]),
                cost,
                f"${s['cost_agent_usd']:.3f} / {s['cost_summary_usd']:.3f} / "
                f"{s['cost_expert_usd']:.3f}",
                _ratio(s.get("cost_vs_baseline")),
                _ratio(s["cost_vs_lower_bound"]),
                _ratio(s["cost_vs_strict_bound"]),
                f"{s['prefix_changes']:.0f} / {s['call_prefix_breaks']:.0f} of "
                f"{s['agent_calls']:.0f}",
                f"{s['tool_calls']:.0f} ({s['searches']:.0f}, {s['re_searches']:.0f})",
                _percent(s["gold_hit_rate"]),
                _percent(s["constraint_kept"]),
                probes,
                _percent(s["fact_coverage"])
                + (f" (judged {_percent(judged)})" if judged is not None else ""),
            ]
        )
    return header, rows


RETURNING_HEADER = [
    "profile",
    "people memory",
    "probes kept (later conversations)",
    "other tenants' facts sent",
    "memory items shown",
    "input tokens per turn",
    "added per turn",
    "cached share",
]


def returning_cells(summaries: dict[str, dict[str, Any]]) -> list[list[str]]:
    """One row per profile of the conversations a remembered person comes back to; the
    tokens added against the same memory profile without people memory
    (`<profile>-memory-off`) where it ran. Empty when the scenario has none."""
    rows = []
    for name, s in summaries.items():
        if not s.get("returning_turns"):
            continue
        per_turn = s["returning_input_tokens_per_turn"]
        without = summaries.get(f"{context_profile(name)}{MEMORY_OFF}")
        added = (
            f"{per_turn - without['returning_input_tokens_per_turn']:+,.0f}"
            if without is not None and s["people_memory"]
            else "—"
        )
        kept = s["returning_probes_kept"]
        rows.append(
            [
                name,
                "on" if s["people_memory"] else "off",
                "—" if kept is None else f"{kept:.0%} of {s['returning_probes']:.0f}",
                f"{s['absent_seen']:.0f} of {s['absent']:.0f}",
                f"{s['returning_memory_items']:.1f}",
                f"{per_turn:,.0f}",
                added,
                _percent(s["returning_cached_share"]),
            ]
        )
    return rows


def returning_table(summaries: dict[str, dict[str, Any]]) -> str:
    rows = returning_cells(summaries)
    if not rows:
        return ""
    lines = [
        "## Returning people",
        "",
        "The conversations in which a person of an earlier one comes back (same tenant): "
        "probes are facts they stated before, checked in what the model was sent; other "
        "tenants' facts are counted when all their key terms were in the system prompt "
        "(with the memory block) or the earlier user messages.",
        "",
        *table_lines(RETURNING_HEADER, rows),
    ]
    return "\n".join(lines) + "\n"


def peer_notes(summaries: dict[str, dict[str, Any]], reference: str = "client") -> list[str]:
    """One sentence per LangChain peer next to `reference`: what it costs and why."""
    ours = summaries.get(reference)
    if ours is None:
        return []
    notes = []
    for name in (n for n in summaries if n in peer_profiles()):
        peer = summaries[name]
        reasons = [FOLDS_EVERY_CALL] if peer["summary_calls"] >= peer["turns"] else [FOLDS_RARELY]
        clearing = peer_profiles()[name].clear_tool_uses
        if clearing is None:
            reasons.append(NO_CLEARING)
        elif (trigger := clearing.get("trigger", 100_000)) > peer["context_tokens_max"]:
            reasons.append(
                f"`ClearToolUsesEdit` never fires: its trigger ({trigger:,} tokens) is above "
                f"the largest context sent ({peer['context_tokens_max']:,.0f})"
            )
        else:
            reasons.append(CLEARS_EVERY_CALL)
        notes.append(
            f"`{name}` costs {peer['cost_usd'] / ours['cost_usd']:.2f}× `{reference}` "
            f"({_percent(peer['cached_share'])} cached against "
            f"{_percent(ours['cached_share'])}, {peer['summary_calls']:.0f} summary calls "
            f"against {ours['summary_calls']:.0f}, prefix broken at "
            f"{peer['call_prefix_breaks']:.0f} of {peer['agent_calls']:.0f} model calls "
            f"against {ours['call_prefix_breaks']:.0f}; probes kept "
            f"{_percent(peer['probes_kept'])} against {_percent(ours['probes_kept'])})"
            + ": "
            + "; ".join(reasons)
            + "."
        )
    return notes


FOLDS_EVERY_CALL = (
    "`SummarizationMiddleware` checks its trigger before every model call, and what it "
    "keeps after a fold is still above its trigger, so it folds "
    "again at nearly every call, rewriting the summary at the top of the context"
)
FOLDS_RARELY = (
    "`SummarizationMiddleware` folds rarely (its trigger far above what it keeps) and "
    "sees all it folds, like `client`; but it counts characters / 4, not tokens, and keeps "
    "every search result verbatim until a fold, where `client` clears them in between"
)
NO_CLEARING = (
    "it runs without `ClearToolUsesEdit`, which recomputes what it clears on every request "
    "and so moves the cached prefix with each new result once past its trigger"
)
CLEARS_EVERY_CALL = (
    "`ClearToolUsesEdit` recomputes what it clears on each request and stores nothing, so "
    "every new result moves the cleared boundary, and the cached prefix with it; its "
    "`clear_at_least` means stop clearing once that many tokens are freed, where ours "
    "means clear only if that many would be, in one persisted step"
)


def table_lines(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table's lines."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cells) + " |" for cells in rows]


def markdown_table(summaries: dict[str, dict[str, Any]]) -> str:
    return "\n".join(table_lines(*table_cells(summaries)))


def handoff_table(summaries: dict[str, dict[str, Any]]) -> str:
    """The handoff cards of the scenario's `handoff` turns, per handoff (not in the costs
    above); empty when no turn asks for a person."""
    handing = {name: s for name, s in summaries.items() if s.get("handoff_turns")}
    if not handing:
        return ""
    header = [
        "profile",
        "handoffs opened",
        "card calls per handoff",
        "input tokens",
        "output tokens",
        "card cost per handoff",
    ]
    lines = [
        "## Handoff to a person",
        "",
        "The scenario's `handoff` turn asks for a person: `HandoffService` takes the turn "
        "and builds the staff card from the stored summary and the context since, with "
        "one summary-model call (priced as the helper model; not in the costs above).",
        "",
    ]
    rows = [
        [
            name,
            f"{s['handoffs_opened']:.0f} of {s['handoff_turns']:.0f}",
            f"{s['handoff_calls']:.0f}",
            _tokens(s["handoff_input_tokens"]),
            _tokens(s["handoff_output_tokens"]),
            f"${s['handoff_cost_usd']:.4f}",
        ]
        for name, s in handing.items()
    ]
    lines += table_lines(header, rows)
    return "\n".join(lines) + "\n"


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
    peers = "".join(f"\n- {note}" for note in peer_notes(summaries))
    later = [table for table in (returning_table(summaries), handoff_table(summaries)) if table]
    report.write_text(
        f"# {title}\n\n{notes}\n\n{markdown_table(summaries)}\n{peers}\n"
        + "".join(f"\n{table}" for table in later),
        encoding="utf-8",
    )
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
