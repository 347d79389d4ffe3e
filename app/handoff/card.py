"""The handoff card: what a staff member reads before taking over — who, which chat, why,
the structured summary (goal, constraints, what was asked and answered, pages cited, the
open question) and where the whole transcript is.

The summary comes from one call of the summary model: it gets the conversation's stored
summary and the messages since (the same request shape as a memory fold, so the offline
`ExtractiveSummaryModel` answers it too) and returns sections; exchanges and pages are
read from the stored messages, not left to the model."""

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from app.agent.memory.summarizer import SECTIONS, extractive_summary, summary_request
from app.agent.messages import message_text, strip_author
from app.chat.outcome import answering
from app.chat.transcript import to_langchain
from app.chat.types import citations_of
from app.db.models import Conversation, Message
from app.observability.calls import PURPOSE_KEY

log = logging.getLogger(__name__)

CONSTRAINTS = SECTIONS[0]  # "Facts and constraints users stated"
CARD_INSTRUCTIONS = f"""You write the card a support person reads before taking a chat \
over from the bot. You get the chat's stored summary (maybe empty) and the messages since, \
one per line as `[#id role] text`. Return plain text in exactly this layout and nothing \
else:

Goal: <what the users want to achieve, one sentence>
{CONSTRAINTS}:
- <author>: <fact or constraint in the user's own words: version, system, country, \
currency, deadline> (#id)
Open questions:
- <author>: <the question still not answered> (#id)
Topics:
- <author>: <question asked> (#id)

Keep every fact and constraint of the summary. Write `- none` under an empty section."""
CARD_RUN_CONFIG: RunnableConfig = {"metadata": {PURPOSE_KEY: "handoff"}, "run_name": "handoff_card"}
EXCHANGES_SHOWN = 5
ANSWER_CHARS = 240


@dataclass(frozen=True)
class Exchange:
    asked: str
    answered: str


@dataclass(frozen=True)
class HandoffCard:
    conversation_key: str
    channel: str
    reason: str
    requested_by: str | None
    who: list[str]
    goal: str
    constraints: list[str]
    exchanges: list[Exchange]
    pages: list[str]
    open_question: str
    transcript_url: str
    topics: list[str] = field(default_factory=list)
    decided: str = ""  # how the decision to hand over was made, and how sure it was

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "HandoffCard":
        exchanges = [Exchange(**e) for e in data.get("exchanges", [])]
        return cls(**{**data, "exchanges": exchanges})

    def as_text(self) -> str:
        """The card as a chat message (the staff Telegram chat)."""
        lines = [
            f"Handoff: {self.conversation_key} ({self.channel})",
            f"Reason: {self.reason}" + (f", by {self.requested_by}" if self.requested_by else ""),
            *([f"Decided: {self.decided}"] if self.decided else []),
            f"Who: {', '.join(self.who) or 'unknown'}",
            f"Goal: {self.goal or '—'}",
            "Constraints:",
            *(f"• {c}" for c in self.constraints or ["none"]),
            "Asked and answered:",
            *(f"• {e.asked} → {e.answered}" for e in self.exchanges or [Exchange("none", "—")]),
            f"Pages cited: {', '.join(self.pages) or 'none'}",
            f"Open question: {self.open_question or 'none'}",
            f"Transcript: {self.transcript_url}",
        ]
        return "\n".join(lines)


def _sections(text: str) -> dict[str, list[str]]:
    """`Name: value` lines and `Name:` headings with `- item` lines under them."""
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("- ") and current is not None:
            if line != "- none":
                found[current].append(line[2:])
        elif ":" in line:
            name, _, value = line.partition(":")
            current = name.strip()
            found[current] = [value.strip()] if value.strip() else []
    return found


def _shorten(text: str, limit: int = ANSWER_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def exchanges_of(messages: Sequence[Message]) -> list[Exchange]:
    """Each user question with the answer its turn got (the last answers shown); the
    request for a person is the card's reason, not an exchange."""
    asked: dict[int, str] = {}
    answered: dict[int, str] = {}
    for m in messages:
        if m.role == "user":
            asked.setdefault(m.turn, f"{m.author or 'user'}: {_shorten(m.content)}")
        elif m.role == "assistant" and not m.tool_calls and m.content:
            answered[m.turn] = _shorten(m.content)
    pairs = [Exchange(q, answered.get(turn, "(no answer)")) for turn, q in asked.items()]
    return pairs[-EXCHANGES_SHOWN:]


def pages_of(messages: Sequence[Message]) -> list[str]:
    """The pages the answers cited, once each, in the order first cited (an answer that
    found nothing cited nothing; pages an unsure answer offered are not cited)."""
    pages: dict[str, str] = {}
    for turn in dict.fromkeys(m.turn for m in messages):
        in_turn = [m for m in messages if m.turn == turn]
        answers = [m.content for m in in_turn if m.role == "assistant" and not m.tool_calls]
        passages = [p for m in in_turn if m.role == "tool" for p in answering(m.artifact)]
        if answers and passages:
            for citation in citations_of(answers[-1], passages):
                pages.setdefault(citation.source, f"{citation.title} ({citation.source})")
    return list(pages.values())


async def summarize_for_card(
    model: BaseChatModel,
    summary: str | None,
    messages: Sequence[Message],
    config: RunnableConfig,
) -> str:
    """The summary model's sections for the card; the extractive summary when the model
    fails (a card without the model's words is better than no handoff)."""
    # The request for a person is the reason on the card, not an open question of it.
    shown = [
        cast(AnyMessage, to_langchain(m))
        for m in messages
        if m.role in ("user", "assistant", "staff", "tool")
    ]
    request = summary_request(summary, shown)
    request[0] = SystemMessage(CARD_INSTRUCTIONS)
    try:
        reply = await model.ainvoke(request, config={**CARD_RUN_CONFIG, **config})
        return message_text(reply)
    except Exception as error:  # the card still gets the stored facts
        log.warning("the handoff card's summary call failed (%s): summarized offline", error)
        rendered = message_text(request[-1])
        start, end = rendered.find("<new_messages>"), rendered.find("</new_messages>")
        return extractive_summary(summary or "", rendered[start + 14 : end].strip())


def build_card(
    conversation: Conversation,
    decision: tuple[str, str],
    requested_by: str | None,
    sections_text: str,
    messages: Sequence[Message],
    transcript_url: str,
) -> HandoffCard:
    sections = _sections(sections_text)
    topics = sections.get("Topics", [])
    open_questions = sections.get("Open questions", [])
    user_messages = [m for m in messages if m.role == "user"]
    earlier = [p for line in sections.get("Participants", []) for p in line.split(", ") if p]
    authors = [m.author for m in user_messages if m.author]
    who = list(dict.fromkeys([*earlier, *authors, *([requested_by] if requested_by else [])]))
    goal = " ".join(sections.get("Goal", [])) or (topics[0] if topics else "")
    if not goal and user_messages:
        goal = strip_author(_shorten(user_messages[0].content))
    # None marked open (the offline summarizer marks only questions whose answer found
    # nothing): the last question asked, the one the client came to a person with.
    open_question = (open_questions or topics or [""])[-1]
    reason, decided = decision
    return HandoffCard(
        conversation_key=conversation.key,
        channel=conversation.channel,
        reason=reason,
        decided=decided,
        requested_by=requested_by,
        who=who,
        goal=goal,
        constraints=sections.get(CONSTRAINTS, []),
        exchanges=exchanges_of(messages),
        pages=pages_of(messages),
        open_question=open_question,
        transcript_url=transcript_url,
        topics=topics,
    )
