"""The knowledge-gap report's questions as labelled questions to review, for the
documentation's scope (knowledge/scope.py): the scope tells "not in the docs" from the
labelled questions nearest a new one, so the questions real users asked that the
documentation did not answer are the ones it most needs. Each is proposed `unanswerable`
(the bot found nothing in the documentation, or its answer got a 👎); a person checks the
labels, turns the ones the documentation does answer into `answerable`, and adds the file
to `SUPPORTBOT_KNOWLEDGE__SCOPE_QUESTIONS` before `supportbot kb calibrate --scope`."""

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import yaml

from app.insights.gaps import GapTurn


def review_file(
    turns: Sequence[GapTurn],
    language: Callable[[str], str],
    since: datetime,
    until: datetime,
) -> str:
    """The turns' questions (each text once) as YAML that `knowledge.relevance.load_questions`
    reads, with a header that says what to check."""
    seen: set[str] = set()
    questions: list[dict[str, Any]] = []
    for turn in turns:
        text = " ".join(turn.question.split())
        if not text or text in seen:
            continue
        seen.add(text)
        questions.append(
            {
                "text": text,
                "language": language(text),
                "docs": "unanswerable",
                "outcome": turn.outcome,
                "conversation": turn.conversation_key,
                "turn": turn.turn,
            }
        )
    header = (
        f"# Questions the bot did not answer from the documentation, {since:%Y-%m-%d %H:%M} to "
        f"{until:%Y-%m-%d %H:%M} UTC\n"
        "# (supportbot insights questions). Each is proposed `docs: unanswerable`:\n"
        "# set `docs: answerable` where the documentation does answer it, then add this file\n"
        "# to SUPPORTBOT_KNOWLEDGE__SCOPE_QUESTIONS and run `supportbot kb calibrate --scope`.\n"
    )
    body = yaml.safe_dump({"questions": questions}, allow_unicode=True, sort_keys=False, width=1000)
    return header + body
