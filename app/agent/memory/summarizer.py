"""Folding old exchanges into the conversation summary.

The summary model gets the previous summary and only the newly folded messages, rendered
one per line with their recall ids, and returns the updated summary. With no LLM
configured, `ExtractiveSummaryModel` does this deterministically: it copies the users'
statements as the facts and constraints they stated, and indexes the questions asked.
"""

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from app.agent.memory.decisions import describe_tool_result, is_cleared, tool_calls_by_id
from app.agent.messages import message_text
from app.agent.models import OFFLINE, build_chat_model
from app.agent.offline import OfflineChatModel
from app.agent.offline.replies import NOT_FOUND_SAYINGS
from app.observability.calls import PURPOSE_KEY
from app.settings import LLMSettings

SUMMARY_HEADING = "Summary of the earlier conversation (#N = recall id for recall_history)"
SECTIONS = ("Facts and constraints users stated", "Decisions", "Open questions", "Topics")
SUMMARY_INSTRUCTIONS = f"""You maintain the running summary of a support chat that \
several people may share. You get the previous summary (maybe empty) and the messages \
that now leave the model's context, one per line as `[#id role] text`. Return the \
updated summary and nothing else, in plain text with exactly this layout:

{SUMMARY_HEADING}
Participants: <names, comma-separated>
{SECTIONS[0]}:
- <author>: <fact or constraint in the user's own words, e.g. product version, operating \
system, country, currency, answer style> (#id)
{SECTIONS[1]}:
- <what was agreed or chosen> (#id)
{SECTIONS[2]}:
- <author>: <question not answered yet> (#id)
{SECTIONS[3]}:
- <author>: <question asked> (#id)

Keep every earlier item unless a newer message contradicts it; never drop a stated fact \
or constraint. Write `- none` under an empty section."""

# run metadata that makes app/observability/calls.py record the call as a summary call
SUMMARY_RUN_CONFIG: RunnableConfig = {
    "metadata": {PURPOSE_KEY: "summary"},
    "tags": [TAG_NOSTREAM],
    "run_name": "memory_summary",
}

_LINE = re.compile(r"^\[#(?P<id>[^\s\]]+) (?P<role>user|assistant|tool)\] (?P<text>.*)$")
_AUTHOR = re.compile(r"^(?P<author>[^:\n]{1,64}): (?P<text>.*)$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# A stated fact or constraint: a user's statement (not a question) of this many words or
# more; shorter ones are acknowledgements ("ok, thanks").
FACT_WORDS = 4
_DECISION = re.compile(r"\b(we'll|we will|we decided|decided|agreed|let's|we go with)\b", re.I)
# How the offline chat model says the documentation had nothing (app/agent/offline/replies.py).
_UNANSWERED = re.compile("|".join(re.escape(said) for said in NOT_FOUND_SAYINGS))
ITEM_CHARS = 220


def render_for_summary(messages: Sequence[AnyMessage]) -> str:
    """One line per message: `[#17 user] Ann: text`, tool results as their description."""
    calls = tool_calls_by_id(messages)
    lines = []
    for m in messages:
        if isinstance(m, HumanMessage):
            role, text = "user", message_text(m)
        elif isinstance(m, ToolMessage):
            role = "tool"
            text = (
                message_text(m)
                if is_cleared(m)
                else describe_tool_result(m, calls.get(m.tool_call_id))
            )
        elif isinstance(m, AIMessage):
            role = "assistant"
            asked = ", ".join(f"{c['name']}({c['args']})" for c in m.tool_calls)
            text = message_text(m) or f"(calls {asked})"
        else:
            continue
        lines.append(f"[#{m.id} {role}] {' '.join(text.split())}")
    return "\n".join(lines)


def summary_request(previous: str | None, folded: Sequence[AnyMessage]) -> list[BaseMessage]:
    return [
        SystemMessage(SUMMARY_INSTRUCTIONS),
        HumanMessage(
            f"<previous_summary>\n{previous or ''}\n</previous_summary>\n"
            f"<new_messages>\n{render_for_summary(folded)}\n</new_messages>"
        ),
    ]


@dataclass
class _SummaryParts:
    participants: list[str] = field(default_factory=list)
    sections: dict[str, list[str]] = field(default_factory=lambda: {s: [] for s in SECTIONS})

    @classmethod
    def parse(cls, text: str) -> "_SummaryParts":
        """Reads back what `render` wrote."""
        parts, section = cls(), None
        for line in text.splitlines():
            if line.startswith("Participants: "):
                parts.participants = [p for p in line[len("Participants: ") :].split(", ") if p]
            elif line.rstrip(":") in SECTIONS:
                section = line.rstrip(":")
            elif section and line.startswith("- ") and line != "- none":
                parts.sections[section].append(line[2:])
        return parts

    def add(self, section: str, item: str) -> None:
        if item not in self.sections[section]:
            self.sections[section].append(item)

    def render(self) -> str:
        lines = [SUMMARY_HEADING, f"Participants: {', '.join(self.participants)}"]
        for section in SECTIONS:
            lines.append(f"{section}:")
            lines += [f"- {item}" for item in self.sections[section]] or ["- none"]
        return "\n".join(lines)


_FACT = re.compile(r"^(?:(?P<author>[^:\n]{1,64}): )?(?P<text>.*?)(?: \(#(?P<id>\d+)\))?$")


@dataclass(frozen=True)
class StatedFact:
    author: str | None
    text: str
    recall_id: int | None


def stated_facts(summary: str) -> list[StatedFact]:
    """The summary's "Facts and constraints users stated", as the layout writes them:
    `- <author>: <fact> (#id)`."""
    facts = []
    for item in _SummaryParts.parse(summary).sections[SECTIONS[0]]:
        match = _FACT.match(item)
        if match and match["text"].strip():
            recall_id = int(match["id"]) if match["id"] else None
            facts.append(StatedFact(match["author"], match["text"].strip(), recall_id))
    return facts


def _shorten(text: str) -> str:
    return text if len(text) <= ITEM_CHARS else text[: ITEM_CHARS - 1] + "…"


def extractive_summary(previous: str, rendered: str) -> str:
    """Updates `previous` with the rendered lines of the newly folded messages."""
    parts = _SummaryParts.parse(previous)
    open_question: str | None = None  # the last user question, until an answer comes
    for line in rendered.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        recall_id, role, text = match["id"], match["role"], match["text"]
        if role == "assistant" and not text.startswith("(calls "):
            if open_question and _UNANSWERED.search(text):
                parts.add("Open questions", open_question)
            open_question = None
        if role != "user":
            continue
        author_match = _AUTHOR.match(text)
        author, said = (
            (author_match["author"], author_match["text"]) if author_match else ("user", text)
        )
        if author not in parts.participants:
            parts.participants.append(author)
        asked = []  # the questions, with the sentences that set them up (what went wrong)
        for sentence in _SENTENCE.split(said):
            if _DECISION.search(sentence) and not sentence.endswith("?"):
                parts.add("Decisions", f"{author}: {_shorten(sentence)} (#{recall_id})")
            elif len(sentence.split()) >= FACT_WORDS and not sentence.endswith("?"):
                parts.add(SECTIONS[0], f"{author}: {_shorten(sentence)} (#{recall_id})")
            else:
                asked.append(sentence)
        if any(sentence.endswith("?") for sentence in asked):
            open_question = f"{author}: {_shorten(' '.join(asked))} (#{recall_id})"
            parts.add("Topics", open_question)
    if open_question:  # asked, never answered in what was folded
        parts.add("Open questions", open_question)
    return parts.render()


# LangChain's SummarizationMiddleware: its prompt lists the messages as XML
# (`get_buffer_string(format="xml")`), an earlier summary as a human message with this start.
LANGCHAIN_SUMMARY_START = "Here is a summary of the conversation to date:"
_XML_MESSAGE = re.compile(r'<message type="(?P<type>\w+)">(?P<body>.*?)</message>', re.DOTALL)
_XML_CONTENT = re.compile(r"<content>(?P<text>.*?)</content>", re.DOTALL)
_XML_TOOL_CALL = re.compile(
    r'<tool_call id="[^"]*" name="(?P<name>[^"]*)">(?P<args>.*?)</tool_call>'
)


def _from_langchain_prompt(request: str) -> tuple[str, str]:
    """The previous summary and the folded messages of a LangChain summary prompt, in the
    form `extractive_summary` reads (positions stand in for recall ids)."""
    previous, lines = "", []
    for number, match in enumerate(_XML_MESSAGE.finditer(request), start=1):
        kind, body = match["type"], match["body"]
        calls = [f"{c['name']}({html.unescape(c['args'])})" for c in _XML_TOOL_CALL.finditer(body)]
        content = _XML_CONTENT.search(body)
        text = html.unescape(content["text"] if content else body if not calls else "")
        if kind == "human" and text.startswith(LANGCHAIN_SUMMARY_START):
            previous = text[len(LANGCHAIN_SUMMARY_START) :].strip()
            continue
        role = {"human": "user", "ai": "assistant", "tool": "tool"}.get(kind)
        if role is None:
            continue
        if role == "assistant" and not text.strip():
            text = f"(calls {', '.join(calls)})"
        lines.append(f"[#{number} {role}] {' '.join(text.split())}")
    return previous, "\n".join(lines)


class ExtractiveSummaryModel(OfflineChatModel):
    """The offline summary model: the offline chat model's plumbing (usage, streaming),
    answering a `summary_request` (or LangChain's summary prompt, for the evals' peers)
    with `extractive_summary`."""

    model_name: str = "offline-summary"

    def _reply(self, messages: list[BaseMessage], tool_names: set[str]) -> AIMessage:
        request = message_text(messages[-1])
        if "<previous_summary>" in request:
            previous = _between(request, "previous_summary")
            rendered = _between(request, "new_messages")
        else:
            previous, rendered = _from_langchain_prompt(request)
        return AIMessage(content=extractive_summary(previous, rendered))


def _between(text: str, tag: str) -> str:
    start, end = text.find(f"<{tag}>"), text.find(f"</{tag}>")
    return text[start + len(tag) + 2 : end].strip() if start >= 0 and end > start else ""


def build_summary_model(llm: LLMSettings) -> BaseChatModel:
    if llm.summary_model == OFFLINE:
        return ExtractiveSummaryModel()
    return build_chat_model(llm.summary_model, llm)
