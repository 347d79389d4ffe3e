"""One eval end to end: knowledge base, every profile (and repeat) run, metrics, report."""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from app.agent.models import OFFLINE, build_chat_model
from app.agent.offline import OfflineChatModel
from app.observability.simulator import RULES
from app.settings import Settings
from evals.judge import judged_fact_coverage
from evals.metrics import (
    Pricing,
    TurnRow,
    add_baseline_ratios,
    handoff_figures,
    profile_summary,
    run_summary,
    turn_rows,
)
from evals.profiles import remembers_people
from evals.report import write_report
from evals.runner import run_profile
from evals.scenario import Scenario, ScenarioTurn, load_scenario
from knowledge.store import IngestReport, KnowledgeBase, ProgressCallback

EVAL_COLLECTION = "evals"


@dataclass(frozen=True)
class EvalConfig:
    scenario: Path
    profiles: list[str]
    out: Path
    provider_rules: str = "gemini"
    price: str = "gemini-3.1-pro"
    helper_price: str = "gemini-3-flash"  # the offline summary and expert models
    kb: Path | None = None  # ingested into the eval collection; None: the configured KB
    cache_dir: Path = Path("./var/evals")
    gap_minutes: float = 0.0
    repeat: int = 1
    seed: int = 0
    # The offline model's shape (app/agent/offline.py); a real model searches as it likes.
    searches_per_question: tuple[int, int] = (1, 3)
    ask_expert_below_shared_words: int = 2
    judge: str | None = None  # a model that grades fact coverage (`evals.judge`)


@dataclass
class EvalResult:
    scenario: Scenario
    summaries: dict[str, dict[str, Any]]
    rows: list[TurnRow]
    setup: list[str]
    files: list[Path] = field(default_factory=list)


def eval_settings(settings: Settings, config: EvalConfig) -> Settings:
    """The configured settings with the eval's knowledge base, prices and cache rules."""
    knowledge = settings.knowledge
    if config.kb is not None:
        knowledge = knowledge.model_copy(
            update={"qdrant_path": config.cache_dir / "qdrant", "collection": EVAL_COLLECTION}
        )
    observability = settings.observability.model_copy(
        update={
            "offline_priced_as": config.price,
            "offline_helper_priced_as": config.helper_price,
            "simulator_rules": config.provider_rules,
        }
    )
    return settings.model_copy(update={"knowledge": knowledge, "observability": observability})


def open_knowledge(
    settings: Settings, config: EvalConfig, progress: ProgressCallback | None = None
) -> tuple[KnowledgeBase, IngestReport | None]:
    """The knowledge base; with `config.kb`, that folder mirrored into the eval collection
    first (unchanged files are skipped, so later runs reuse the index)."""
    knowledge = KnowledgeBase.from_settings(eval_settings(settings, config).knowledge)
    report = knowledge.ingest(config.kb, progress=progress) if config.kb else None
    return knowledge, report


def chat_model(settings: Settings, config: EvalConfig, repeat: int) -> BaseChatModel:
    if settings.llm.model != OFFLINE:
        return build_chat_model(settings.llm.model, settings.llm, client_retries=0)
    return OfflineChatModel(
        searches_per_question=config.searches_per_question,
        seed=config.seed + repeat,
        ask_expert_below_shared_words=config.ask_expert_below_shared_words,
    )


def evaluate(
    settings: Settings,
    config: EvalConfig,
    knowledge: KnowledgeBase,
    *,
    model_for_repeat: Callable[[int], BaseChatModel] | None = None,
    on_turn: Callable[[], None] | None = None,
) -> EvalResult:
    """Runs every profile `config.repeat` times, then writes the report into `config.out`."""
    scenario = load_scenario(config.scenario)
    settings = eval_settings(settings, config)
    pricing = Pricing(settings.observability)
    judge = build_chat_model(config.judge, settings.llm) if config.judge else None
    turns = {(chat.id, turn.id): turn for chat in scenario.chats for turn in chat.turns}
    rows: list[TurnRow] = []
    runs: dict[str, list[dict[str, Any]]] = {}
    for repeat in range(config.repeat):
        for profile in config.profiles:
            model = (model_for_repeat or (lambda r: chat_model(settings, config, r)))(repeat)
            run = asyncio.run(
                run_profile(
                    settings,
                    scenario,
                    profile,
                    model,
                    knowledge,
                    provider_rules=config.provider_rules,
                    gap_minutes=config.gap_minutes,
                    repeat=repeat,
                    on_turn=on_turn,
                )
            )
            run_rows = turn_rows(run, scenario, pricing)
            if judge is not None:
                judge_rows(judge, run_rows, turns)
            rows += run_rows
            runs.setdefault(profile, []).append(
                run_summary(run_rows, run.prefix_changes, run.call_prefix_breaks)
                | handoff_figures(run, pricing)
                | {"people_memory": remembers_people(profile)}
            )
    summaries = {profile: profile_summary(found) for profile, found in runs.items()}
    add_baseline_ratios(summaries)
    result = EvalResult(scenario, summaries, rows, describe_setup(settings, config, scenario, rows))
    result.files = write_report(
        config.out, f"{scenario.name}: memory profiles", result.setup, summaries, rows
    )
    return result


def judge_rows(
    judge: BaseChatModel, rows: list[TurnRow], turns: dict[tuple[str, str], ScenarioTurn]
) -> None:
    for row in rows:
        turn = turns[(row.chat, row.turn)]
        if turn.facts:
            row.judged_fact_coverage = judged_fact_coverage(
                judge, turn.text, row.answer, turn.facts
            )


def describe_setup(
    settings: Settings, config: EvalConfig, scenario: Scenario, rows: list[TurnRow]
) -> list[str]:
    """What a reader needs next to the table to trust or reproduce it."""
    rules = RULES[config.provider_rules]
    knowledge = settings.knowledge
    search = "hybrid (dense + Qdrant BM25)" if knowledge.hybrid else "dense"
    fused = [f"in-process BM25 ×{knowledge.keyword_weight:g}"] if knowledge.keyword_weight else []
    if knowledge.static_weight and knowledge.language == "en":
        fused.append(f"WordLlama ×{knowledge.static_weight:g}")
    if fused:
        search += f" + {' + '.join(fused)} for queries in `{knowledge.language}`"
    if knowledge.crosslingual_weight:
        search += (
            f"; + multilingual USE ×{knowledge.crosslingual_weight:g} for queries in a "
            "language no page is in"
        )
    price = settings.observability.prices.get(config.price)
    first = [r for r in rows if r.profile == config.profiles[0] and r.repeat == 0]
    searches = sum(r.searches for r in first) / len(first)
    experts = sum(r.expert_calls for r in rows)
    if settings.llm.model == OFFLINE:
        fewest, most = config.searches_per_question
        model = (
            f"model: offline, deterministic; shape: {fewest}–{most} knowledge-base searches "
            f"per user message (the message, then reformulations; count drawn per message "
            f"from the seed), measured {searches:.2f} per turn under "
            f"`{config.profiles[0]}`; asks the expert when no passage found shares "
            f"{config.ask_expert_below_shared_words} words with the question, if `ask_expert` "
            f"is bound ({experts} expert calls in this eval)"
        )
    else:
        model = f"model: {settings.llm.model} ({searches:.2f} searches per turn measured)"
    gaps = (
        f"{config.gap_minutes:g} min between turns"
        if config.gap_minutes
        else "turns back to back (warm cache)"
    )
    return [
        f"scenario: `{config.scenario}` ({scenario.turn_count} turns in "
        f"{len(scenario.chats)} conversation{'s' if len(scenario.chats) > 1 else ''}, "
        f"audience {scenario.audience}"
        + (
            f"; {scenario.handoff_count} closing turn(s) asking for a person, reported "
            "under the table)"
            if scenario.handoff_count
            else ")"
        ),
        model,
        f"cache: provider-reported where a provider reports it, else simulated with "
        f"`{rules.name}` rules (min prefix {rules.min_prefix_tokens} tokens, TTL "
        f"{rules.ttl_seconds} s, reads {rules.read_multiplier}×, writes "
        f"{rules.write_multiplier}×); time: {gaps}, a turn's `gap_minutes` overrides",
        f"prices: agent calls as `{config.price}`"
        + (f" (${price.input}/M input, ${price.output}/M output)" if price else "")
        + f", offline summary/expert calls as `{config.helper_price}`, both under the "
        "rules' cache multipliers",
        f"knowledge base: collection `{knowledge.collection}` ({config.kb or 'as configured'}), "
        f"embedder {knowledge.embedder}, {search} search, {knowledge.top_k} passages in at "
        f"most {knowledge.result_token_budget} tokens per search",
        "lower bound: every prefix sent earlier in the run cached (no minimum, no TTL), "
        "new tokens at full price; strict bound: every message (or system block) sent "
        "earlier cached wherever it sits, so a profile's own prefix breaks cost nothing "
        "there; prefix breaks: turns whose first request does not extend the previous "
        "turn's last / agent requests that do not extend the one before them",
        "quality: gold-page hits of each turn's searches; constraint at probes: the "
        "constraint turn's statements in a user message or the system prompt/summary sent; "
        "probes kept: facts stated earlier (a turn's `probes`) all of whose key terms "
        "(content words and numbers) were in what the model was sent, tool results and "
        "the current message left out; fact coverage: facts whose words mostly appear in "
        "the answer" + (f", judged by `{config.judge}`" if config.judge else " (no judge)"),
        f"runs: {config.repeat} per profile, seed {config.seed}",
    ]
