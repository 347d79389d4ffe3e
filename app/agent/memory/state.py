"""What the memory middleware shares with the agent graph and with ChatService."""

from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired, Protocol, runtime_checkable

from langchain.agents.middleware.types import AgentState, OmitFromInput


@dataclass(frozen=True)
class ArchivedMessage:
    """A stored message the model no longer sees in full."""

    id: int
    turn: int
    role: str
    content: str  # the full original text
    description: str | None  # a cleared tool result's placeholder
    conversation: str | None = None  # another conversation of the person's (its key)


@runtime_checkable
class Archive(Protocol):
    async def search(self, query: str) -> list[ArchivedMessage]:
        """Best matches first."""
        ...


@dataclass(frozen=True)
class MemoryContext:
    """The runtime context of one turn (create_agent's `context_schema`)."""

    conversation_id: int
    archive: Archive | None = None


@dataclass(frozen=True)
class MemoryUpdate:
    """This turn's decisions, for ChatService to persist (message ids are database ids)."""

    placeholders: dict[str, str] = field(default_factory=dict)  # tool results now cleared
    dropped: list[str] = field(default_factory=list)  # trimmed or folded
    summary: str | None = None  # the new summary when a fold happened
    summary_model: str | None = None


class MemoryState(AgentState[Any]):
    summary: NotRequired[str | None]  # the stored summary, right after the system prompt
    # What the people were remembered by (app/memory), between the system prompt and summary.
    people_memory: NotRequired[str | None]
    archived: NotRequired[bool]  # anything cleared or dropped yet: recall_history is offered
    memory: NotRequired[Annotated[MemoryUpdate | None, OmitFromInput]]
