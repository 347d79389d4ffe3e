"""Numbers from a profile run: one row per turn, one summary per profile.

Quality needs no judge: the gold-page hit rate of the searches made for a turn; for a
`probe` turn, whether the users' constraint (the sentences of the `constraint` turn it
refers to) was in what the model was sent, in a user message or the system prompt with
the summary (search results do not count); and fact coverage, the share of a turn's
facts whose words mostly appear in the answer (word overlap, not a judgement; an LLM
judge can be added, see `evals.judge`). Across conversations: the probes of the
conversations a remembered person comes back to, what those turns cost, the items of the
memory block they were sent, and other people's facts (`absent`) that reached the model.
"""

import re
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from app.agent.memory.decisions import message_tokens
from app.agent.memory.recall import RECALL_TOOL
from app.agent.messages import message_text
from app.agent.offline import EXPERT_TOOL
from app.memory.store import BLOCK_HEADING
from app.observability.pricing import cost_usd, price_for
from app.observability.usage import UsageRecord
from app.settings import ObservabilitySettings
from evals.runner import CallRecord, ProfileRun
from evals.scenario import Scenario
from evals.words import fact_words

# A statement or fact counts as present when this share of its content words is.
MOSTLY = 0.6
HELPER_PURPOSES = ("summary", "expert")
# The summary model's other calls, costed with its folds: the write at idle (app/memory/idle).
SUMMARY_MODEL_PURPOSES = {"memory": "summary"}
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class Pricing:
    """Prices every call as the app does (`price_for`): the offline agent model as
    `offline_priced_as`, the offline summary and expert models as
    `offline_helper_priced_as`, cache reads and writes as the simulator's rules bill them;
    a real model by its own entry in the price table."""

    observability: ObservabilitySettings

    def cost(self, call: UsageRecord, *, served: int | None = None) -> float:
        """USD of the call; with `served`, had that many of its input tokens been read
        from the cache (no writes billed) and only the others at the full input price."""
        price = price_for(call.model, self.observability)
        if price is None:
            return 0.0
        if served is not None:
            call = replace(call, cached_tokens=served, cache_write_tokens=0)
        return cost_usd(call, price)


@dataclass
class TurnRow:
    profile: str
    repeat: int
    chat: str
    turn: str
    step: int
    kind: str
    context_tokens: int
    llm_calls: int
    agent_calls: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    cached_share: float
    cache_source: str
    cost_agent_usd: float
    cost_summary_usd: float
    cost_expert_usd: float
    cost_usd: float
    lower_bound_cost_usd: float
    strict_bound_cost_usd: float
    cumulative_cost_usd: float
    summary_calls: int
    tool_calls: int
    searches: int
    re_searches: int
    recall_calls: int
    expert_calls: int
    queries: list[str]
    gold_hit: bool | None  # None: the turn has no gold pages
    constraint_coverage: float | None  # None: not a probe turn
    constraint_kept: bool | None
    probes: int  # facts stated earlier that this turn needs
    probes_kept: int  # ... that were in what the model was sent
    probes_missed: list[str]
    returning: bool  # in a later conversation of a remembered person
    memory_items: int  # lines of the remembered people's block the model was sent
    absent: int  # facts of other people (another tenant's) that must not be sent
    absent_seen: list[str]  # ... that were
    fact_coverage: float | None
    answer: str
    judged_fact_coverage: float | None = None  # with --judge


def share_present(wanted: str, text_words: set[str]) -> float:
    words = fact_words(wanted)
    return sum(w in text_words for w in words) / len(words) if words else 1.0


def key_terms(text: str) -> set[str]:
    """The words a fact hinges on: content words and numbers, lowercase, plural `s` off,
    so `19% and 7% VAT` is {19, 7, vat} and survives `Mark: VAT rates 19 % / 7 %`."""
    words = {_singular(w) for w in fact_words(text)}
    return words | {number for number in _NUMBER.findall(text)}


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def probe_kept(fact: str, sent_terms: set[str]) -> bool:
    """A fact counts as sent when all its key terms were."""
    return key_terms(fact) <= sent_terms


def sent_memory_text(request: Sequence[BaseMessage]) -> str:
    """Everything the model was sent at the turn's start but the current message and tool
    results: the system prompt with any summary, earlier user messages, answers."""
    last_user = max((i for i, m in enumerate(request) if isinstance(m, HumanMessage)), default=-1)
    return "\n".join(
        message_text(m)
        for i, m in enumerate(request)
        if i != last_user and isinstance(m, SystemMessage | HumanMessage | AIMessage)
    )


def remembered_text(request: Sequence[BaseMessage]) -> str:
    """What the model was sent of the users' words and the memory: the system prompt
    (with the summary) and the user messages before the current one."""
    users = [m for m in request if isinstance(m, HumanMessage)][:-1]
    systems = [m for m in request if isinstance(m, SystemMessage)]
    return "\n".join(message_text(m) for m in [*systems, *users])


def memory_block_items(request: Sequence[BaseMessage]) -> int:
    """The items of the remembered people's block in a request's system message."""
    blocks = [
        block.get("text", "")
        for m in request
        if isinstance(m, SystemMessage) and isinstance(m.content, list)
        for block in m.content
        if isinstance(block, dict)
    ]
    shown = [b for b in blocks if b.startswith(BLOCK_HEADING)]
    return sum(line.startswith("- ") for b in shown for line in b.splitlines())


def turn_rows(run: ProfileRun, scenario: Scenario, pricing: Pricing) -> list[TurnRow]:
    chats = {chat.id: chat for chat in scenario.chats}
    returning = scenario.returning_chats
    retrieved: dict[str, set[tuple[str, str]]] = {chat.id: set() for chat in scenario.chats}
    rows: list[TurnRow] = []
    cumulative = 0.0
    for outcome in run.turns:
        turn = outcome.turn
        costs = {p: 0.0 for p in ("agent", *HELPER_PURPOSES)}
        for call in outcome.calls:
            column = SUMMARY_MODEL_PURPOSES.get(call.purpose, call.purpose)
            costs[column] = costs.get(column, 0.0) + pricing.cost(call)
        cost = sum(costs.values())
        cumulative += cost
        seen = retrieved[outcome.chat]
        re_searches = sum(1 for s in outcome.searches if s.passages and s.passages <= seen)
        for search in outcome.searches:
            seen |= search.passages
        constraint = None
        if turn.kind == "probe":
            remembered = set(fact_words(remembered_text(outcome.first_request)))
            statements = chats[outcome.chat].constraint_statements(turn)
            constraint = min((share_present(s, remembered) for s in statements), default=None)
        sent_terms = key_terms(sent_memory_text(outcome.first_request)) if turn.probes else set()
        missed = [fact for fact in turn.probes if not probe_kept(fact, sent_terms)]
        # another person's facts would come in with the memory: the system prompt's blocks
        said_terms = key_terms(remembered_text(outcome.first_request)) if turn.absent else set()
        leaked = [fact for fact in turn.absent if probe_kept(fact, said_terms)]
        answer_words = set(fact_words(outcome.answer))
        input_tokens = sum(c.input_tokens for c in outcome.calls)
        cached_tokens = sum(c.cached_tokens for c in outcome.calls)
        rows.append(
            TurnRow(
                profile=run.profile,
                repeat=run.repeat,
                chat=outcome.chat,
                turn=turn.id,
                step=outcome.step,
                kind=turn.kind,
                context_tokens=sum(message_tokens(m) for m in outcome.first_request),
                llm_calls=len(outcome.calls),
                agent_calls=sum(1 for c in outcome.calls if c.purpose == "agent"),
                input_tokens=input_tokens,
                cached_tokens=cached_tokens,
                output_tokens=sum(c.output_tokens for c in outcome.calls),
                cached_share=cached_tokens / input_tokens if input_tokens else 0.0,
                cache_source=cache_source(outcome.calls),
                cost_agent_usd=costs["agent"],
                cost_summary_usd=costs["summary"],
                cost_expert_usd=costs["expert"],
                cost_usd=cost,
                lower_bound_cost_usd=sum(
                    pricing.cost(c, served=c.ideal_cached_tokens) for c in outcome.calls
                ),
                strict_bound_cost_usd=sum(
                    pricing.cost(c, served=c.strict_cached_tokens) for c in outcome.calls
                ),
                cumulative_cost_usd=cumulative,
                summary_calls=sum(1 for c in outcome.calls if c.purpose == "summary"),
                tool_calls=len(outcome.tool_calls),
                searches=len(outcome.searches),
                re_searches=re_searches,
                recall_calls=outcome.tool_calls.count(RECALL_TOOL),
                expert_calls=outcome.tool_calls.count(EXPERT_TOOL),
                queries=[s.query for s in outcome.searches],
                gold_hit=(
                    any(source in turn.gold for s in outcome.searches for source in s.sources)
                    if turn.gold
                    else None
                ),
                constraint_coverage=constraint,
                constraint_kept=None if constraint is None else constraint >= MOSTLY,
                probes=len(turn.probes),
                probes_kept=len(turn.probes) - len(missed),
                probes_missed=missed,
                returning=outcome.chat in returning,
                memory_items=memory_block_items(outcome.first_request),
                absent=len(turn.absent),
                absent_seen=leaked,
                fact_coverage=(
                    sum(share_present(f, answer_words) >= MOSTLY for f in turn.facts)
                    / len(turn.facts)
                    if turn.facts
                    else None
                ),
                answer=outcome.answer,
            )
        )
    return rows


def cache_source(calls: Sequence[CallRecord]) -> str:
    """`provider` when the provider reported caching on any call, else `simulated`."""
    return "provider" if any(c.cache_source == "provider" for c in calls) else "simulated"


def _share(flags: Sequence[bool | None]) -> float | None:
    known = [f for f in flags if f is not None]
    return sum(known) / len(known) if known else None


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def run_summary(
    rows: Sequence[TurnRow], prefix_changes: int, call_prefix_breaks: int
) -> dict[str, Any]:
    """The figures of one profile run."""
    input_tokens = sum(r.input_tokens for r in rows)
    cached_tokens = sum(r.cached_tokens for r in rows)
    cost = sum(r.cost_usd for r in rows)
    lower_bound = sum(r.lower_bound_cost_usd for r in rows)
    strict_bound = sum(r.strict_bound_cost_usd for r in rows)
    probes = sum(r.probes for r in rows)
    later = [r for r in rows if r.returning]
    later_probes = sum(r.probes for r in later)
    later_input = sum(r.input_tokens for r in later)
    return {
        "turns": len(rows),
        "context_tokens_last": rows[-1].context_tokens,
        "context_tokens_max": max(r.context_tokens for r in rows),
        "llm_calls": sum(r.llm_calls for r in rows),
        "input_tokens": input_tokens,
        "cached_tokens": cached_tokens,
        "output_tokens": sum(r.output_tokens for r in rows),
        "cached_share": cached_tokens / input_tokens if input_tokens else 0.0,
        "cost_usd": cost,
        "cost_agent_usd": sum(r.cost_agent_usd for r in rows),
        "cost_summary_usd": sum(r.cost_summary_usd for r in rows),
        "cost_expert_usd": sum(r.cost_expert_usd for r in rows),
        "lower_bound_cost_usd": lower_bound,
        "cost_vs_lower_bound": cost / lower_bound if lower_bound else None,
        "strict_bound_cost_usd": strict_bound,
        "cost_vs_strict_bound": cost / strict_bound if strict_bound else None,
        "summary_calls": sum(r.summary_calls for r in rows),
        "tool_calls": sum(r.tool_calls for r in rows),
        "searches": sum(r.searches for r in rows),
        "re_searches": sum(r.re_searches for r in rows),
        "return_re_searches": sum(r.re_searches for r in rows if r.kind == "return"),
        "recall_calls": sum(r.recall_calls for r in rows),
        "expert_calls": sum(r.expert_calls for r in rows),
        "gold_hit_rate": _share([r.gold_hit for r in rows]),
        "constraint_kept": _share([r.constraint_kept for r in rows]),
        "constraint_coverage": _mean([r.constraint_coverage for r in rows]),
        "probes": probes,
        "probes_kept": sum(r.probes_kept for r in rows) / probes if probes else None,
        "returning_turns": len(later),
        "returning_probes": later_probes,
        "returning_probes_kept": (
            sum(r.probes_kept for r in later) / later_probes if later_probes else None
        ),
        "returning_input_tokens_per_turn": later_input / len(later) if later else None,
        "returning_cached_share": (
            sum(r.cached_tokens for r in later) / later_input if later_input else None
        ),
        "returning_memory_items": _mean([r.memory_items for r in later]),
        "absent": sum(r.absent for r in rows),
        "absent_seen": sum(len(r.absent_seen) for r in rows),
        "fact_coverage": _mean([r.fact_coverage for r in rows]),
        "judged_fact_coverage": _mean([r.judged_fact_coverage for r in rows]),
        "prefix_changes": prefix_changes,
        "call_prefix_breaks": call_prefix_breaks,
        "agent_calls": sum(r.agent_calls for r in rows),
        "cache_source": "provider"
        if any(r.cache_source == "provider" for r in rows)
        else ("simulated"),
    }


def handoff_figures(run: ProfileRun, pricing: Pricing) -> dict[str, Any]:
    """The handoff cards of a run's `handoff` turns, per handoff opened (apart from the
    run's cost: each card is one summary-model call); nothing when no turn asks for one."""
    if not run.handoffs:
        return {}
    opened = sum(len(h.reasons) for h in run.handoffs)
    calls = [call for h in run.handoffs for call in h.calls]
    per = opened or 1
    return {
        "handoff_turns": len(run.handoffs),
        "handoffs_opened": opened,
        "handoff_calls": len(calls) / per,
        "handoff_input_tokens": sum(c.input_tokens for c in calls) / per,
        "handoff_output_tokens": sum(c.output_tokens for c in calls) / per,
        "handoff_cost_usd": sum(pricing.cost(c) for c in calls) / per,
        "handoff_models": sorted({c.model for c in calls}),
    }


def profile_summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Repeated runs of one profile: numbers averaged, the cost's spread kept."""
    summary: dict[str, Any] = {}
    for key, value in runs[0].items():
        values = [run[key] for run in runs]
        if isinstance(value, int | float) and not isinstance(value, bool):
            summary[key] = _mean(values)
        else:
            summary[key] = value
    summary["repeats"] = len(runs)
    summary["cost_usd_min"] = min(run["cost_usd"] for run in runs)
    summary["cost_usd_max"] = max(run["cost_usd"] for run in runs)
    return summary


def add_baseline_ratios(summaries: dict[str, dict[str, Any]], baseline: str = "baseline") -> None:
    reference = summaries.get(baseline)
    for summary in summaries.values():
        summary["cost_vs_baseline"] = (
            summary["cost_usd"] / reference["cost_usd"]
            if reference and reference["cost_usd"]
            else None
        )


def row_dicts(rows: Sequence[TurnRow]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]
