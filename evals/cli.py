"""`supportbot eval …`: play a scenario under memory profiles and report cost and quality,
or once to score how the answers read.

The evals, LangChain and the knowledge base are imported by the commands that use them, so
that `supportbot --help` does not load them. One module: the `eval` command group, each
command a thin shell over its evals module.
"""

import json
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from app.settings import Settings
    from evals.decisions import Decided
    from evals.metrics import TurnRow

app = typer.Typer(
    help="Evals: memory profiles and answers on recorded conversations.", no_args_is_help=True
)
TABLE_WIDTH = 230  # the profile table's 15 columns, unwrapped, also when piped to a file
RETURNING_WIDTH = 150  # the returning people's table, likewise
ANSWERS_WIDTH = 140  # the answers-on-documentation table, likewise
DEFAULT_PROFILES = ",".join(
    [
        *("baseline", "clearing", "trim+clear", "hybrid", "trim-naive", "client"),
        *("langchain-docs", "langchain-tuned", "forget-all"),
    ]
)


# Options both commands take: the manuals to mirror into the eval index, and where it lives.
KbOption = Annotated[
    Path | None,
    typer.Option(help="folder ingested into the eval collection (gold paths are relative)"),
]
CacheDirOption = Annotated[Path, typer.Option(help="the eval index lives here")]


def _search_range(value: str) -> tuple[int, int]:
    fewest, _, most = value.partition("-")
    return int(fewest), int(most or fewest)


def _progress(console: "Console") -> "Progress":
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

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
    profiles: Annotated[
        str,
        typer.Option(
            help="comma-separated profiles; `<profile>-memory-off`: without the memory of "
            "people across conversations"
        ),
    ] = DEFAULT_PROFILES,
    provider_rules: Annotated[
        str, typer.Option(help="prompt-cache rules: openai, anthropic, gemini, block16")
    ] = "gemini",
    price: Annotated[str, typer.Option(help="price-table model the agent is billed as")] = (
        "gemini-3.1-pro"
    ),
    helper_price: Annotated[
        str, typer.Option(help="price-table model the offline summary/expert are billed as")
    ] = "gemini-3-flash",
    kb: KbOption = None,
    cache_dir: CacheDirOption = Path("./var/evals"),
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
    from rich.console import Console
    from rich.table import Table

    from app.observability.simulator import RULES
    from app.settings import get_settings
    from evals.harness import EvalConfig, evaluate, open_knowledge
    from evals.profiles import MEMORY_OFF, context_profile, known_profiles
    from evals.report import RETURNING_HEADER, peer_notes, returning_cells, table_cells
    from evals.scenario import load_scenario
    from knowledge.store import discover_files

    console = Console()
    names = [name.strip() for name in profiles.split(",") if name.strip()]
    settings = get_settings()
    known = known_profiles(settings)
    unknown = [n for n in names if context_profile(n) not in known]
    if unknown:
        console.print(
            f"[red]unknown profiles {unknown}; defined: {', '.join(known)} (each also as "
            f"<profile>{MEMORY_OFF}: without the memory of people across conversations)"
        )
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
    with _progress(console) as bar:
        files = len(discover_files(kb.resolve())) if kb else 0
        task = bar.add_task(f"indexing {kb}", total=files)
        knowledge, report = open_knowledge(settings, config, lambda _: bar.advance(task))
        bar.update(task, visible=False)
        try:
            playing = bar.add_task(f"playing {scenario.name}", total=turns)
            result = evaluate(settings, config, knowledge, on_turn=partial(bar.advance, playing))
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
    Console(width=max(console.width, TABLE_WIDTH)).print(table)
    if returning := returning_cells(result.summaries):
        later = Table(*RETURNING_HEADER, title="returning people (later conversations)")
        for cells in returning:
            later.add_row(*cells)
        Console(width=max(console.width, RETURNING_WIDTH)).print(later)
    for note in peer_notes(result.summaries):
        console.print(f"- {note}")
    console.print("wrote " + ", ".join(str(path) for path in result.files))


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


@app.command()
def answers(
    scenario: Annotated[
        list[Path] | None, typer.Option(help="scenario YAML; repeat the option for several")
    ] = None,
    questions: Annotated[
        Path | None,
        typer.Option(
            help="instead: a question set (evals/answers/), each question a conversation of "
            "its own over --kb, scored right / wrong section / wrong page / unsure / refused"
        ),
    ] = None,
    kb: KbOption = None,
    cache_dir: CacheDirOption = Path("./var/evals"),
    searches: Annotated[
        str, typer.Option(help="offline model: fewest-most searches per user message")
    ] = "1",
    out: Annotated[
        Path | None, typer.Option(help="write every turn's answer and scores to this JSON file")
    ] = None,
) -> None:
    """Play each SCENARIO once with the configured model (offline by default, in the
    service's shape) and score how its answers read (evals/answers.py); or ask each of
    --questions over the documentation in --kb (evals/own_docs.py)."""
    from app.settings import get_settings

    settings = get_settings()  # a bad setting is told first, as by every command
    if questions is not None:
        if kb is None or scenario:
            raise typer.BadParameter("--questions needs --kb and no --scenario")
        _answer_questions(settings, questions, kb, cache_dir, out)
        return
    if not scenario:
        raise typer.BadParameter("give --scenario (one or more) or --questions with --kb")
    from rich.console import Console
    from rich.table import Table

    from evals.answers import answer_figures, play_scenario, says_not_found
    from evals.harness import EvalConfig, chat_model, open_knowledge
    from evals.scenario import load_scenario
    from knowledge.store import discover_files

    console = Console()
    configs = [
        EvalConfig(
            scenario=path,
            profiles=[],
            out=cache_dir,
            kb=kb,
            cache_dir=cache_dir,
            searches_per_question=_search_range(searches),
            ask_expert_below_shared_words=0,
        )
        for path in scenario
    ]
    played: list[tuple[str, list[TurnRow]]] = []
    with _progress(console) as bar:
        files = len(discover_files(kb.resolve())) if kb else 0
        task = bar.add_task(f"indexing {kb}", total=files)
        knowledge, _ = open_knowledge(settings, configs[0], lambda _: bar.advance(task))
        bar.update(task, visible=False)
        try:
            for config in configs:
                playing = bar.add_task(
                    f"playing {config.scenario.name}",
                    total=load_scenario(config.scenario).turn_count,
                )
                model = chat_model(settings, config, repeat=0)
                found, rows = play_scenario(
                    settings, config, knowledge, model, on_turn=partial(bar.advance, playing)
                )
                played.append((found.name, rows))
        finally:
            knowledge.close()
    figures = [answer_figures(name, rows) for name, rows in played]
    if len(played) > 1:
        figures.append(answer_figures("all", [row for _, rows in played for row in rows]))
    table = Table(
        "scenario",
        "turns",
        'unanswerable told "not in the docs"',
        "answerable refused",
        "fact coverage",
        "greetings without a search",
        "mean answer words",
        title="answers",
    )
    for f in figures:
        table.add_row(
            f.scenario,
            str(f.turns),
            f"{_percent(f.unanswerable_told_not_found)} of {f.unanswerable}",
            f"{_percent(f.answerable_refused)} of {f.answerable}",
            _percent(f.fact_coverage),
            f"{_percent(f.smalltalk_without_search)} of {f.smalltalk}",
            f"{f.mean_answer_words:.0f}",
        )
    console.print(table)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        turns = [
            {"scenario": name, "says_not_found": says_not_found(row.answer), **asdict(row)}
            for name, rows in played
            for row in rows
        ]
        out.write_text(json.dumps(turns, indent=2, ensure_ascii=False), encoding="utf-8")
        console.print(f"wrote {out}")


def _answer_questions(
    settings: "Settings", path: Path, kb: Path, cache_dir: Path, out: Path | None
) -> None:
    from rich.console import Console
    from rich.table import Table

    from evals.own_docs import figures_by_language, load_question_set, run_question_set

    console = Console()
    corpus, asked = load_question_set(path)
    with _progress(console) as bar:
        task = bar.add_task(f"indexing {kb}", total=None)
        playing = bar.add_task(f"asking {len(asked)} questions", total=len(asked))
        scored = run_question_set(
            settings,
            kb.resolve(),
            asked,
            store=cache_dir / "answers-qdrant",
            collection=f"answers-{corpus}",
            on_ingested=lambda _: bar.update(task, visible=False),
            on_question=partial(bar.advance, playing),
        )
    # Unsure: outcome not_found, the answering page among the first three offered.
    table = Table(
        *("language", "answerable", "right", "wrong section", "wrong page"),
        *("unsure, page offered", "refused", "useful", "unanswerable", "not in the docs"),
        title=f"answers on {corpus} ({path.name})",
    )
    for figures in figures_by_language(scored):
        counts = figures.answerable
        table.add_row(
            figures.language,
            str(figures.answerable_count),
            *(
                str(counts[verdict])
                for verdict in ("right", "wrong_section", "wrong_page", "unsure_offered")
            ),
            str(counts["refused"]),
            _percent(figures.share("right", "unsure_offered")),
            str(figures.unanswerable_count),
            _percent(figures.share("told")),
        )
    Console(width=max(console.width, ANSWERS_WIDTH)).print(table)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        rows = [
            {
                "text": row.question.text,
                "language": row.question.language,
                "pages": sorted(row.question.pages),
                "verdict": row.verdict,
                "outcome": row.outcome,
                "cited": row.cited,
                "reply": row.reply,
            }
            for row in scored
        ]
        out.write_text(json.dumps(rows, indent=2, ensure_ascii=False), encoding="utf-8")
        console.print(f"wrote {out}")


@app.command()
def decisions(
    messages: Annotated[
        Path | None,
        typer.Option(
            help="labelled messages (default: evals/decisions/heldout_20.yaml, which trained "
            "nothing)"
        ),
    ] = None,
    folds: Annotated[
        int,
        typer.Option(
            help="instead: cross-validate the intent classifier on its own examples in this "
            "many folds and sweep its thresholds (how they were chosen)"
        ),
    ] = 0,
    noisy_copies: Annotated[
        int | None,
        typer.Option(
            help="with --folds: misspelled copies of each example fitted with it (default: "
            "the setting decisions.noisy_copies)"
        ),
    ] = None,
    noise_rate: Annotated[
        float | None,
        typer.Option(help="with --folds: the share of a fitted copy's words misspelled"),
    ] = None,
    heldout_noise_rate: Annotated[
        float,
        typer.Option(help="with --folds: the share of a held-out example's words misspelled"),
    ] = 0.3,
    by_set: Annotated[
        bool,
        typer.Option(
            help="sweep the person head's threshold with each of decisions.person_examples "
            "held out in turn (how person_confidence was chosen)"
        ),
    ] = False,
    search: Annotated[
        bool,
        typer.Option(
            help='search each labelled question in the configured knowledge base ("not in '
            'the docs"); needs the GnuCash manuals ingested'
        ),
    ] = True,
    out: Annotated[Path | None, typer.Option(help="write every decision to this JSON file")] = None,
) -> None:
    """Route labelled messages as the service does and report, per language, handoff
    precision and recall, small talk, "not in the docs" and language identification;
    see evals/decisions.py."""
    from rich.console import Console
    from rich.table import Table

    from app.decisions.decider import decider_for
    from app.settings import get_settings
    from evals.decisions import (
        HELDOUT,
        HELDOUT_NOISE_VERSIONS,
        clause_sweep,
        cross_validate,
        decide_all,
        in_sample,
        leave_one_set_out,
        load_messages,
        threshold_sweep,
    )
    from evals.decisions import load_examples as load_decision_examples
    from knowledge.scope import documentation_scope
    from knowledge.store import KnowledgeBase

    console = Console()
    settings = get_settings()
    decider = decider_for(settings.knowledge.embedder, settings.decisions)
    if by_set:
        sweep = Table("probability ≥", "person given", "questions given", title="person, by set")
        for threshold, wanted, questions in leave_one_set_out(
            decider, load_decision_examples(), SWEEP_BY_SET
        ):
            sweep.add_row(f"{threshold:.2f}", str(wanted), str(questions))
        console.print(sweep)
        return
    if folds:
        examples = load_decision_examples()
        validated = cross_validate(
            decider, examples, folds, noisy_copies, noise_rate, heldout_noise_rate
        )
        rows = validated.clean
        copies = decider.classifier.noisy_copies if noisy_copies is None else noisy_copies
        rate = decider.classifier.noise_rate if noise_rate is None else noise_rate
        fitted = f"fitted with {copies} misspelled copies an example at {rate}" if copies else ""
        title = f"{folds}-fold cross-validation on the examples" + (f", {fitted}" if fitted else "")
        _print_decisions(console, title, rows, settings)
        for intent, other in (("person", "bot"), ("smalltalk", "person"), ("bot", "person")):
            sweep = Table(
                "probability ≥",
                f"{intent} given",
                "questions given",
                f"{other} examples given",
                title=intent,
            )
            for threshold, wanted, questions, others in threshold_sweep(rows, intent, SWEEP):
                sweep.add_row(f"{threshold:.2f}", str(wanted), str(questions), str(others))
            console.print(sweep)
        whole = settings.decisions.person_confidence
        sweep = Table(
            "a clause's probability ≥", "person given", "questions given", title="person by clause"
        )
        for threshold, wanted, questions in clause_sweep(rows, whole, SWEEP):
            sweep.add_row(f"{threshold:.2f}", str(wanted), str(questions))
        console.print(sweep)
        _print_decisions(
            console,
            f"the same folds, {HELDOUT_NOISE_VERSIONS} misspelled versions of each held-out "
            f"example at {heldout_noise_rate}",
            validated.noisy,
            settings,
        )
        sweep = Table(
            "probability ≥", "person given", "questions given", title="person, misspelled"
        )
        for threshold, wanted, questions, _ in threshold_sweep(validated.noisy, "person", SWEEP):
            sweep.add_row(f"{threshold:.2f}", str(wanted), str(questions))
        console.print(sweep)
        return
    messages = messages or HELDOUT
    labelled = load_messages(messages)
    if in_sample(messages, settings.decisions.person_examples):
        console.print(
            f"the figures are in-sample: the person head is fitted to {messages.name} "
            "(decisions.person_examples)",
            soft_wrap=True,
        )
    knowledge, scope = None, None
    if search:
        knowledge = KnowledgeBase.from_settings(settings.knowledge)
        if not knowledge.stats().chunks:
            console.print("the knowledge base is empty: ingest the GnuCash manuals first")
            raise typer.Exit(1)
        scope = documentation_scope(settings.knowledge, knowledge.embedder)
    try:
        with _progress(console) as bar:
            task = bar.add_task("deciding", total=len(labelled))
            rows = decide_all(
                decider,
                labelled,
                knowledge,
                settings.knowledge.relevance_thresholds,
                partial(bar.advance, task),
                scope,
            )
    finally:
        if knowledge is not None:
            knowledge.close()
    _print_decisions(console, messages.name, rows, settings)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        dumped = [
            {**asdict(row.message), "decision": asdict(row.decision), "hands_over": row.hands_over,
             "hands_over_before_model": row.hands_over_before_model,
             "smalltalk": row.smalltalk, "not_in_docs": row.not_in_docs}
            for row in rows
        ]  # fmt: skip
        out.write_text(json.dumps(dumped, indent=2, ensure_ascii=False), encoding="utf-8")
        console.print(f"wrote {out}")


@app.command("fit-decider")
def fit_decider() -> None:
    """Fit the decider on its examples and labelled messages (the settings' `decisions`)
    and write it beside them (app/decisions/fitted.npz), so that a server starts without
    embedding them: after any change to the examples, the labelled sets or the fit."""
    from app.decisions.decider import write_shipped_fit
    from app.decisions.intent import FITTED
    from app.settings import get_settings

    settings = get_settings()
    fitted_on = write_shipped_fit(settings.knowledge.embedder, settings.decisions)
    typer.echo(f"{FITTED}: fitted on {fitted_on} labelled messages")


@app.command()
def kinds(
    pairs: Annotated[
        Path | None,
        typer.Option(help="labelled statement pairs (default: evals/kinds/heldout.yaml)"),
    ] = None,
    wrong: Annotated[bool, typer.Option(help="list the pairs the rule gets wrong")] = False,
) -> None:
    """How often the kind of a remembered fact replaces what it should and only that, per
    language; see evals/kinds.py."""
    from rich.console import Console
    from rich.table import Table

    from evals.kinds import HELDOUT, accuracy, judge, load_pairs

    console = Console()
    path = pairs or HELDOUT
    judged = judge(load_pairs(path))
    table = Table(
        "language",
        "pairs",
        "right",
        "one kind, replaced",
        "two kinds, both kept",
        title=f"kinds of remembered facts: {path.name}",
    )
    for a in accuracy(judged):
        table.add_row(
            a.lang,
            str(a.pairs),
            f"{a.right} ({a.right / a.pairs:.0%})",
            f"{a.same_right} of {a.same}",
            f"{a.different_right} of {a.different}",
        )
    console.print(table)
    for j in judged if wrong else []:
        if not j.right:
            label = "one kind" if j.pair.same else "two kinds"
            console.print(
                f"{j.pair.lang} ({label}): {j.pair.older!r} → {j.older_kind!r}; "
                f"{j.pair.newer!r} → {j.newer_kind!r}"
            )


@app.command("follow-ups")
def follow_ups(
    pairs: Annotated[
        Path | None,
        typer.Option(
            help="labelled follow-ups (default: evals/insights/followups_heldout.yaml, which "
            "chose nothing)"
        ),
    ] = None,
    sweep: Annotated[
        bool, typer.Option(help="list the figures over a grid of both thresholds")
    ] = False,
    missed: Annotated[bool, typer.Option(help="list the follow-ups read wrong")] = False,
) -> None:
    """How the Insights rule that marks an answer unresolved (a follow-up that says it
    failed, or asks again) reads labelled follow-ups, per language; see evals/followups.py."""
    from rich.console import Console
    from rich.table import Table

    from app.insights.followups import AGAIN_SIMILARITY, WRONG_PROBABILITY, FollowUpReader
    from app.settings import get_settings
    from evals.followups import AGAIN_GRID, HELDOUT, KINDS, WRONG_GRID, caught_shares, load_pairs
    from evals.followups import read_all as read_follow_ups
    from knowledge.embeddings import get_embedder

    console = Console()
    path = pairs or HELDOUT
    knowledge = get_settings().knowledge
    reader = FollowUpReader(get_embedder(knowledge.embedder, knowledge.model_cache_dir))
    reads = read_follow_ups(reader, load_pairs(path))

    def share(caught: tuple[int, int]) -> str:
        return f"{caught[0]}/{caught[1]}" if caught[1] else "-"

    grid = [(w, a) for w in WRONG_GRID for a in AGAIN_GRID] if sweep else []
    table = Table("wrong ≥", "again ≥", "language", *KINDS, title=f"follow-ups: {path.name}")
    for wrong, again in [(WRONG_PROBABILITY, AGAIN_SIMILARITY), *grid]:
        for language, kinds in sorted(caught_shares(reads, wrong, again).items()):
            table.add_row(str(wrong), str(again), language, *(share(kinds[k]) for k in KINDS))
    console.print(table)
    console.print("wrong, again: the share marked unresolved (caught); other: marked by mistake")
    for read in reads if missed else []:
        if read.caught(WRONG_PROBABILITY, AGAIN_SIMILARITY) != (read.item.kind != "other"):
            console.print(
                f"{read.item.language} {read.item.kind}: {read.item.follow_up!r} "
                f"(wrong {read.wrong_probability:.2f}, same question {read.similarity:.2f})"
            )


SWEEP = (0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99)
SWEEP_BY_SET = (0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9)
DECISIONS_WIDTH = 120  # a column per language, unwrapped, also when piped to a file


def _print_decisions(
    console: "Console", title: str, rows: "list[Decided]", settings: "Settings"
) -> None:
    from rich.console import Console
    from rich.table import Table

    from evals.decisions import by_language

    found = by_language(rows, settings.decisions.expected_languages)
    table = Table("figure", *(f.language for f in found), title=title)
    lines = [
        ("product questions handed over (offline)", "questions_handed_over"),
        ("… with a real model (before it)", "questions_handed_over_before_model"),
        ("requests for a person handed over (offline)", "persons_handed_over"),
        ("… with a real model (before it)", "persons_handed_over_before_model"),
        ("handoff precision (offline)", "handoff_precision"),
        ("small-talk precision", "smalltalk_precision"),
        ("problem reports answered as small talk", "problems_as_smalltalk"),
        ('unanswerable told "not in the docs"', "unanswerable_caught"),
        ("answerable refused", "answerable_refused"),
        ("language identified", "language_right"),
    ]
    for label, name in lines:
        table.add_row(label, *(str(getattr(f, name)) for f in found))
    Console(width=max(console.width, DECISIONS_WIDTH)).print(table)
    decisions, relevance = settings.decisions, settings.knowledge.relevance_thresholds
    per_language = "".join(f", {lang} {value}" for lang, value in relevance.by_language.items())
    knowledge = settings.knowledge
    scope = f"; scope cut {knowledge.scope_cut}" if knowledge.scope_questions else ""
    console.print(
        f"thresholds: person {decisions.person_confidence} (offline), "
        f"{decisions.person_confidence_before_model} (real model), a clause "
        f"{decisions.person_clause_confidence}, a long message's closing sentences "
        f"{decisions.person_closing_confidence} (from {decisions.person_closing_from_chars} "
        f"characters); small talk {decisions.smalltalk_confidence}; "
        f"relevance ({settings.knowledge.embedder}) {relevance.default}{per_language}"
        f"{scope}"
    )


LOOP_WIDTH = 170  # the loop's table, unwrapped, also when piped to a file


@app.command()
def loop(
    week: Annotated[
        Path | None,
        typer.Option(help="the week's questions and staff answers (default: evals/loop/week.yaml)"),
    ] = None,
    kb: Annotated[
        Path | None,
        typer.Option(help="the documentation folder (default: the sample knowledge base)"),
    ] = None,
    top: Annotated[
        int | None,
        typer.Option(min=1, help="the team answers the gap report's first N groups (default: all)"),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="write every reply and what the team saved to this JSON")
    ] = None,
) -> None:
    """Day 1 of client questions, the team answering the knowledge-gap report, day 2: how
    many questions the saved answers resolve, and that nothing else cites them, over a fresh
    database and store; see evals/loop.py."""
    from tempfile import TemporaryDirectory

    from rich.console import Console
    from rich.table import Table

    from app.settings import get_settings
    from evals.loop import WEEK, day_questions, load_week, loop_figures, mistakes, run_loop

    settings = get_settings()
    path = week or WEEK
    folder = (kb or settings.knowledge.sample_path).resolve()
    planned = load_week(path)
    console = Console()
    with _progress(console) as bar, TemporaryDirectory(prefix="supportbot-loop-") as store:
        task = bar.add_task(f"indexing {folder.name}", total=None)
        total = sum(len(day_questions(planned, day)) for day in (1, 2))
        playing = bar.add_task(f"asking {total} questions over two days", total=total)
        result = run_loop(
            settings,
            folder,
            planned,
            store=Path(store),
            collection=f"loop-{planned.corpus}",
            top=top,
            on_ingested=lambda: bar.update(task, visible=False),
            on_question=partial(bar.advance, playing),
        )

    def resolved(pair: tuple[int, int]) -> str:
        return f"{pair[0]}/{pair[1]}" if pair[1] else "—"

    table = Table(
        *("language", "gap day 1", "day 2: again", "reworded", "other language"),
        *("resolution rate (Insights) day 1 → 2", "day-2 replies citing a saved answer"),
        *("controls citing a saved answer (days 1, 2)", "answerable controls unchanged"),
        title=f"the loop on {planned.corpus} ({path.name}): gap questions resolved",
    )
    for f in loop_figures(result):
        table.add_row(
            f.language,
            *(resolved(pair) for pair in (f.day1, f.again, f.reworded, f.other_language)),
            f"{_percent(f.resolution_before)} → {_percent(f.resolution_after)}",
            f"{f.day2_quoting_saved} + {f.day2_offering_saved} offered of {f.day2_replies}",
            f"{f.controls_quoting_saved} + {f.controls_offering_saved} offered of {f.controls}",
            resolved(f.answerable_unchanged),
        )
    Console(width=max(console.width, LOOP_WIDTH)).print(table)
    answered = [s for s in result.saved if s.topic]
    console.print(
        f"the team: {sum(s.added for s in answered)} answers saved from "
        f"{len(answered)} of {len(result.insights[1].groups)} gap report groups (the others "
        f"on no gap topic); questions left out of the forms (on no topic answered): "
        f"{sum(len(s.left_out) for s in answered)}",
        soft_wrap=True,
    )
    for row in mistakes(result):
        console.print(
            f"cites a saved answer it should not: {row.asked.kind} "
            f"{row.asked.question.language} {row.asked.question.text!r} → {row.scored.outcome}, "
            f"{', '.join(row.scored.cited)}",
            soft_wrap=True,
        )
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        dumped = {
            "saved": [asdict(s) for s in result.saved],
            "replies": [
                {"day": day, "kind": row.asked.kind, "wording": row.asked.wording,
                 "topic": row.asked.topic.name if row.asked.topic else None,
                 "text": row.asked.question.text,
                 "language": row.asked.question.language, "resolved": row.resolved,
                 "outcome": row.scored.outcome, "verdict": row.scored.verdict,
                 "cited": row.scored.cited, "reply": row.scored.reply}
                for day, rows in result.days.items()
                for row in rows
            ],
        }  # fmt: skip
        out.write_text(json.dumps(dumped, indent=2, ensure_ascii=False), encoding="utf-8")
        console.print(f"wrote {out}")


@app.command()
def matching(
    questions: Annotated[
        Path | None,
        typer.Option(help="the saved answers and questions (default: evals/loop/calibration.yaml)"),
    ] = None,
    kb: Annotated[
        Path | None,
        typer.Option(help="the documentation folder (default: the sample knowledge base)"),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="write every reply to this JSON file")] = None,
) -> None:
    """Save a set's team answers, ask its questions: how many find their answer, and how
    many negatives quote one, over a fresh database and store; see evals/matching.py."""
    from tempfile import TemporaryDirectory

    from rich.console import Console
    from rich.table import Table

    from app.settings import get_settings
    from evals.matching import (
        CALIBRATION,
        load_matching_set,
        matching_figures,
        run_matching,
    )

    settings = get_settings()
    path = questions or CALIBRATION
    folder = (kb or settings.knowledge.sample_path).resolve()
    planned = load_matching_set(path)
    console = Console()
    with _progress(console) as bar, TemporaryDirectory(prefix="supportbot-matching-") as store:
        playing = bar.add_task(f"asking {len(planned.asked)} questions", total=len(planned.asked))
        rows = run_matching(
            settings,
            folder,
            planned,
            store=Path(store),
            collection="matching",
            on_question=partial(bar.advance, playing),
        )
    columns = ("asked", "found", "another", "quoted", "offered", "from the docs")
    table = Table("questions", *columns, title=f"saved answers matched ({path.name})")
    for kind, counts in matching_figures(rows, planned).items():
        table.add_row(kind, *(str(counts.get(column, "—")) for column in columns))
    console.print(table)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        dumped = [
            {"kind": row.asked.kind, "topic": row.asked.topic, "text": row.asked.question.text,
             "language": row.asked.question.language, "quoted": row.quoted,
             "offered": row.offered, "outcome": row.scored.outcome,
             "cited": row.scored.cited, "reply": row.scored.reply}
            for row in rows
        ]  # fmt: skip
        out.write_text(json.dumps(dumped, indent=2, ensure_ascii=False), encoding="utf-8")
        console.print(f"wrote {out}")
