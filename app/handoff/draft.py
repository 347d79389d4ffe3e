"""The drafted reply on a handoff card: the bot's best answer to the client's open
question, for the staff member to edit and send as their own, or to dismiss.

The draft is a turn of the conversation's own agent (the same model, tools and memory
profile) run on the context up to the open question, whose output is kept apart: it is
never sent to the client and never stored as a message of the transcript. With the offline
model that is the extractive answer it would give from the search's passages; with a real
model its usual reply, each provider call recorded with the purpose `draft`. A draft holds
its sources; when no search found a passage that answers, there is none, with the reason."""

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from app.agent.memory.recall import ConversationArchive
from app.agent.memory.state import MemoryContext
from app.chat.context import working_history
from app.chat.outcome import answering, outcome_of
from app.chat.turn import AgentForProfile, run_agent
from app.chat.types import Citation, citations_of
from app.db.models import Conversation, Message
from app.observability.calls import PURPOSE_KEY, UsageCollector

DraftStatus = Literal["drafted", "none", "dismissed", "sent"]
NOTHING_FOUND = "nothing relevant found"
NO_QUESTION = "no open question"
MODEL_ASKED_FOR_PERSON = "the model asked for a person"
FAILED = "drafting failed"
INTERRUPTED = "drafting was interrupted (the service stopped)"
DRAFTING_OFF = "drafting is off"
DRAFT_PURPOSE = "draft"
SHORT_CHARS = 500  # a draft as the staff chat's card shows it


@dataclass(frozen=True)
class Draft:
    """`text` and `citations` of a drafted reply; `reason` why there is none."""

    status: DraftStatus
    text: str = ""
    citations: list[Citation] = field(default_factory=list)
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Draft":
        citations = [Citation(**c) for c in data.get("citations", [])]
        return cls(**{**data, "citations": citations})

    def settled(self, status: DraftStatus) -> "Draft":
        """The draft once staff dismissed or sent it (its text kept, for the record)."""
        return replace(self, status=status)

    def as_text(self) -> str:
        """The draft as the staff chat's card shows it: shortened, with its sources."""
        if self.status == "none":
            return f"Draft: no draft: {self.reason}"
        text = " ".join(self.text.split())
        short = text if len(text) <= SHORT_CHARS else text[: SHORT_CHARS - 1] + "…"
        sources = ", ".join(f"{c.title} ({c.source})" for c in self.citations)
        return f"Draft reply: {short}" + (f"\nDraft sources: {sources}" if sources else "")


def no_draft(reason: str) -> Draft:
    return Draft("none", reason=reason)


def open_question_of(open_question: str, messages: Sequence[Message]) -> Message | None:
    """The stored message of the card's open question: the one it names (`(#id)`), else
    the last user message shown on the card; None when there is no question."""
    users = [m for m in messages if m.role == "user"]
    named = [m for m in users if open_question.endswith(f"(#{m.id})")]
    found = named or users
    return found[-1] if found else None


def draft_input(
    summary: str | None, messages: Sequence[Message], question: Message
) -> dict[str, Any]:
    """The agent's input: the context up to and with the open question, as the question's
    own turn started from (what came after it is the handoff's, not the question's)."""
    upto = [m for m in messages if m.seq <= question.seq]
    return {
        "messages": working_history(upto, set()).messages,
        "summary": summary or None,
        "archived": False,
        "people_memory": None,
    }


def draft_of(new_messages: Sequence[BaseMessage]) -> Draft:
    """The draft in what the agent added: its answer with the passages it cited, or none."""
    outcome = outcome_of(new_messages)
    if outcome == "handed_off":
        return no_draft(MODEL_ASKED_FOR_PERSON)
    passages = [
        passage
        for m in new_messages
        if isinstance(m, ToolMessage)
        for passage in answering(m.artifact)
    ]
    answer = new_messages[-1].text.strip() if new_messages else ""
    if outcome == "not_found" or not passages or not answer:
        return no_draft(NOTHING_FOUND)
    return Draft("drafted", answer, citations_of(answer, passages))


async def make_draft(
    agents: AgentForProfile,
    conversation: Conversation,
    archive: ConversationArchive,
    working: dict[str, Any],
    collector: UsageCollector,
    recursion_limit: int,
) -> Draft:
    """Run the conversation's agent on `working` (`draft_input`) as a draft: its calls
    collected by `collector` (and its trace) with the purpose `draft`, nothing stored."""
    config: RunnableConfig = {
        "callbacks": collector.callbacks,
        "recursion_limit": recursion_limit,
        "metadata": {PURPOSE_KEY: DRAFT_PURPOSE, "conversation": conversation.key},
        "run_name": "handoff_draft",
    }
    context = MemoryContext(conversation.id, archive)
    agent = agents(conversation.profile)
    result = await run_agent(agent, working, config, context, None)
    loaded = {m.id for m in working["messages"]}
    return draft_of([m for m in result["messages"] if m.id not in loaded])
