"""What a turn came to, stored with it (`turns.outcome`): the figure handoffs count and
operators read, decided from what the turn did rather than from the answer's wording."""

from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import BaseMessage, ToolMessage

from app.agent.tools import ASK_EXPERT, KNOWLEDGE_TOOL, SUGGESTED
from app.handoff.tool import REQUEST_HUMAN

TurnOutcome = Literal["answered", "not_found", "expert", "handed_off", "quiet", "bot_back"]
# The outcomes of turns the bot answered itself (what "found nothing N times" counts).
BOT_ANSWERED: tuple[TurnOutcome, ...] = ("answered", "not_found", "expert")


def outcome_of(new_messages: Sequence[BaseMessage]) -> TurnOutcome:
    """`handed_off` when the model called `request_human`; `expert` when web research
        answered; `not_found` when the knowledge base was searched and no search returned a
        relevant passage that holds what was asked (the search tool keeps only those; pages it
    offers as possibly related do not count); else `answered`."""
    results = [m for m in new_messages if isinstance(m, ToolMessage) and m.status != "error"]
    if any(m.name == REQUEST_HUMAN for m in results):
        return "handed_off"
    if any(m.name == ASK_EXPERT for m in results):
        return "expert"
    searches = [m for m in results if m.name == KNOWLEDGE_TOOL]
    if searches and not any(answering(m.artifact) for m in searches):
        return "not_found"
    return "answered"


def answering(artifact: object) -> list[dict[str, Any]]:
    """The passages of a search's artifact that answer (not those offered as related)."""
    if not isinstance(artifact, list):
        return []
    return [p for p in artifact if isinstance(p, dict) and not p.get(SUGGESTED)]
