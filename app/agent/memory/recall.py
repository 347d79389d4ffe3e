"""`recall_history`: search what this conversation moved out of the context, and what the
same person's other conversations in their memory scope did (app/memory/scope.py)."""

import re

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, tool
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agent.memory.state import ArchivedMessage, MemoryContext
from app.db import queries
from app.db.models import Message
from knowledge.tokens import count_tokens

RECALL_TOOL = "recall_history"
_RECALL_ID = re.compile(r"^\s*(?:recall\s+id\s*)?#?(\d+)\s*$", re.IGNORECASE)
_WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


class ConversationArchive:
    """The cleared and dropped messages of one stored conversation and, for a remembered
    person (`scope`), those of their turns in their other conversations (never another
    scope's)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        conversation_id: int,
        scope: str | None = None,
    ) -> None:
        self._sessions = sessions
        self._conversation_id = conversation_id
        self._scope = scope

    async def search(self, query: str) -> list[ArchivedMessage]:
        """By recall id (`17`, `recall id 17`), else by shared words, most shared first
        (this conversation's first among equals, then the newest)."""
        async with self._sessions() as session:
            stored = await queries.archived_messages(session, self._conversation_id)
            elsewhere = (
                await queries.scope_archive(session, self._scope, self._conversation_id)
                if self._scope
                else []
            )
        archived = [_archived(m) for m in stored]
        archived += [_archived(m, key) for m, key in elsewhere]
        if by_id := _RECALL_ID.match(query):
            return [m for m in archived if m.id == int(by_id[1])]
        asked = _words(query)
        scored = [(len(asked & _words(f"{m.description or ''} {m.content}")), m) for m in archived]
        ranked = sorted(
            scored,
            key=lambda pair: (pair[0], pair[1].conversation is None, pair[1].id),
            reverse=True,
        )
        return [m for score, m in ranked if score > 0]


def _archived(message: Message, conversation: str | None = None) -> ArchivedMessage:
    return ArchivedMessage(
        message.id,
        message.turn,
        message.role,
        message.content,
        message.placeholder,
        conversation,
    )


def _truncate(text: str, budget: int) -> str:
    """The longest start of `text` within `budget` tokens."""
    if count_tokens(text) <= budget:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count_tokens(text[:middle]) <= budget - 1:
            low = middle
        else:
            high = middle - 1
    return text[:low] + "…"


def render_recalled(found: list[ArchivedMessage], max_results: int, token_budget: int) -> str:
    if not found:
        return "Nothing in the archive matches."
    shown = found[:max_results]
    per_piece = token_budget // len(shown)
    return "\n\n".join(
        _truncate(
            f"[recall id {m.id}, "
            + (f"conversation {m.conversation}, " if m.conversation else "")
            + f"turn {m.turn}, {m.role}"
            + (f": {m.description}" if m.description else "")
            + f"]\n{m.content}",
            per_piece,
        )
        for m in shown
    )


def recall_history_tool(max_results: int, token_budget: int) -> BaseTool:
    @tool(RECALL_TOOL)
    async def recall_history(query: str, runtime: ToolRuntime[MemoryContext]) -> str:
        """Search this conversation's earlier messages and tool results that are no longer
        shown in full (cleared, trimmed or summarized), and those of the same person's
        earlier conversations (results name their conversation). Pass words to look for,
        or a recall id from a placeholder or the summary. Use it before repeating a search."""
        archive = runtime.context.archive if runtime.context else None
        found = await archive.search(query) if archive else []
        return render_recalled(found, max_results, token_budget)

    return recall_history
