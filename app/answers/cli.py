"""`supportbot answers`: the support team's answers from the command line: list them,
export them to a file, import a file (each imported answer is indexed into its
collection). YAML or JSON, by the file's suffix. Only typer is imported here."""

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

if TYPE_CHECKING:
    from app.answers.service import AnswerService
    from app.settings import Settings

app = typer.Typer(no_args_is_help=True)
T = TypeVar("T")
AnswersFile = Annotated[Path, typer.Argument(help="a .yaml, .yml or .json file")]
FIELDS = ("question", "variants", "answer", "languages", "enabled", "collection", "author")


def _settings() -> "Settings":
    """The settings, or one line on what is wrong with them (before any file is read)."""
    from app.kb_support import load_settings

    return load_settings()


def _with_answers(settings: "Settings", work: "Callable[[AnswerService], Awaitable[T]]") -> T:
    """Run `work` with the service over the configured database and knowledge base."""
    from app.answers.service import AnswerService
    from app.db.engine import make_async_engine, make_session_factory
    from app.kb_support import open_knowledge_base

    async def run(service: AnswerService, dispose: Callable[[], Awaitable[None]]) -> T:
        try:
            return await work(service)
        finally:
            await dispose()

    with open_knowledge_base() as kb:
        engine = make_async_engine(settings.db)
        service = AnswerService.configured(make_session_factory(engine), kb, settings.knowledge)
        return asyncio.run(run(service, engine.dispose))


def _is_yaml(path: Path) -> bool:
    if path.suffix.lower() in (".yaml", ".yml"):
        return True
    if path.suffix.lower() == ".json":
        return False
    typer.echo(f"error: {path} is neither .yaml, .yml nor .json", err=True)
    raise typer.Exit(2)


@app.command("list")
def list_answers(
    collection: Annotated[str | None, typer.Option(help="only this collection's")] = None,
) -> None:
    """The answers, the newest first: id, in use or disabled, collection, languages,
    question."""
    answers = _with_answers(_settings(), lambda service: service.listed(collection))
    if not answers:
        typer.echo("no answers yet")
    for a in answers:
        state = "in use" if a.enabled else "disabled"
        languages = ",".join(a.languages) or "-"
        typer.echo(f"{a.id}\t{state}\t{a.collection}\t{languages}\t{a.question}")


@app.command("export")
def export_answers(file: AnswersFile) -> None:
    """Write every answer to FILE (an `answers:` list), for review or another install."""
    settings = _settings()
    as_yaml = _is_yaml(file)
    answers = _with_answers(settings, lambda service: service.listed())
    rows = [{name: getattr(a, name) for name in FIELDS} for a in reversed(answers)]
    if as_yaml:
        import yaml

        text = yaml.safe_dump({"answers": rows}, allow_unicode=True, sort_keys=False)
    else:
        text = json.dumps({"answers": rows}, ensure_ascii=False, indent=2) + "\n"
    file.write_text(text, encoding="utf-8")
    typer.echo(f"{len(rows)} answer(s) written to {file}")


def _read(file: Path) -> list[dict[str, Any]]:
    as_yaml = _is_yaml(file)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        typer.echo(f"error: cannot read {file}: {error.strerror or error}", err=True)
        raise typer.Exit(2) from error
    if as_yaml:
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    rows = data.get("answers") if isinstance(data, dict) else None
    bad = not isinstance(rows, list) or not all(
        isinstance(r, dict)
        and str(r.get("question", "")).strip()
        and str(r.get("answer", "")).strip()
        for r in rows
    )
    if bad:
        typer.echo(f"error: {file} holds no `answers:` list of question and answer", err=True)
        raise typer.Exit(2)
    return list(rows)  # type: ignore[arg-type]


@app.command("import")
def import_answers(file: AnswersFile) -> None:
    """Read answers from FILE (as `export` writes them) and index each into its
    collection: one whose question its collection has already is updated, the others
    are added."""
    from app.answers.service import AnswerDraft

    settings = _settings()
    rows = _read(file)

    async def work(service: "AnswerService") -> tuple[int, int]:
        added = updated = 0
        for row in rows:
            draft = AnswerDraft(
                question=str(row["question"]),
                answer=str(row["answer"]),
                variants=[str(v) for v in row.get("variants") or []],
                languages=[str(code) for code in row.get("languages") or []],
                enabled=bool(row.get("enabled", True)),
                collection=row.get("collection"),
                author=row.get("author"),
            )
            if await service.save(draft):
                added += 1
            else:
                updated += 1
        return added, updated

    added, updated = _with_answers(settings, work)
    typer.echo(f"answers: +{added} added, ~{updated} updated, indexed")
