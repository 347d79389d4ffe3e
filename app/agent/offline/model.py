"""The offline chat model: deterministic, no key, no network, drives the real agent loop.

It answers like a help desk that works from the documentation:

- a message the decider (app/decisions) reads as small talk — a greeting or thanks that
  asks nothing — gets a short reply in the asker's language and no search;
- anything else is searched with `search_knowledge_base` (a follow-up such as "and for
  ATM withdrawals?" together with the previous question's topic,
  `knowledge.queries.contextual_query`); given this turn's passages it answers from the
  first one it can quote, pages in the asker's language first: its numbered steps in
  order, menu paths (`Business → Customer → New Invoice`) as written, or else its
  sentences that best match the question (`passages.excerpt`); a support team's answer
  (`knowledge.team_answers`) is quoted whole, as written. It names that page once,
  at the end, so the turn's citations are that page;
- when the search returned nothing relevant it says it did not find this in the
  documentation and suggests rephrasing or asking a person. Relevance is the search
  tool's decision (the knowledge base's similarity threshold,
  `SUPPORTBOT_KNOWLEDGE__MIN_SIMILARITY`); a passage without a similarity (a test
  double's) counts when it shares `min_shared_words` of the question's content words (a
  follow-up's: of the previous user message's).

Token usage is counted with the service's tokenizer.

Production agents search more than once per question and ask for help when the knowledge
base has nothing fitting; evals give the offline model that shape with two settings:
`searches_per_question` (fewest, most: the question, then reformulations of it, one
search per model call; the count is drawn per question from `seed`) and
`ask_expert_below_shared_words` (call `ask_expert`, when bound, if no passage found this
turn shares that many words with the question). The defaults keep one search, no expert.
"""

import hashlib
import random
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from app.agent.messages import count_message_tokens, message_text, strip_author
from app.agent.offline.passages import (
    excerpt,
    keywords,
    passage_text,
    sentences_of,
    stems_of,
    words_of,
)
from app.agent.offline.replies import (
    CANNOT_SEARCH,
    not_found_reply,
    noted_reply,
    see_also,
    smalltalk_reply,
    unsure_reply,
)
from app.agent.tools import SUGGESTED
from app.decisions.decider import MessageDecider, decider_for
from app.memory.facts import remembered
from app.memory.kept import saved_place
from app.observability.simulator import request_tokens
from app.settings import DecisionSettings
from knowledge.chunking import HEADING_SEPARATOR
from knowledge.embeddings import DEFAULT_EMBEDDER
from knowledge.loaders import UNKNOWN_LANGUAGE, language_from_path
from knowledge.queries import contextual_query
from knowledge.team_answers import answer_text, is_team_answer

SEARCH_TOOL = "search_knowledge_base"
EXPERT_TOOL = "ask_expert"
OFFERED_PAGES = 3  # pages an unsure answer offers at most


def section_name(passage: dict[str, Any]) -> str:
    """How an answer names the passage it quotes: its page, and its section when that is
    not the page itself ("Recording a payment › Record a partial payment")."""
    title = str(passage.get("title", ""))
    section = str(passage.get("heading", "")).split(HEADING_SEPARATOR)[-1].strip()
    return f"{title} › {section}" if section and section != title else title


def _page_language(passage: dict[str, Any]) -> str:
    return language_from_path(Path(str(passage.get("source", ""))))


def _saved_place(messages: list[BaseMessage]) -> str | None:
    """Where the system prompt's memory note says a "remember that …" is saved (the note
    opens a block of its own); None: this conversation only."""
    for message in messages:
        if isinstance(message, SystemMessage):
            blocks = [message.content] if isinstance(message.content, str) else message.content
            for block in blocks:
                text = block if isinstance(block, str) else str(block.get("text", ""))
                if (place := saved_place(text)) is not None:
                    return place
    return None


class OfflineChatModel(BaseChatModel):
    """A real LangChain chat model that needs no provider; see the module docstring."""

    model_name: str = "offline"
    answer_sentences: int = 3
    max_steps: int = 12
    # Relevance of a passage without a similarity: see the module docstring.
    min_shared_words: int = 1
    searches_per_question: tuple[int, int] = (1, 1)  # fewest, most
    seed: int = 0
    ask_expert_below_shared_words: int = 0  # 0: never ask
    # What a message is (small talk, its language); None: the default settings' decider.
    decider: MessageDecider | None = None

    @property
    def _llm_type(self) -> str:
        return "supportbot-offline"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | BaseTool | Any],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tools: list[dict[str, Any]] = kwargs.get("tools") or []
        reply = self._reply(messages, {tool["function"]["name"] for tool in tools})
        input_tokens = len(request_tokens(messages, tools))
        output_tokens = count_message_tokens(reply)
        reply.usage_metadata = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        }
        reply.response_metadata = {"model_name": self.model_name}
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        """The same reply in pieces of a few words, usage on the last piece, so that
        streaming clients see the offline model stream like a provider's."""
        reply = self._generate(messages, stop, run_manager, **kwargs).generations[0].message
        assert isinstance(reply, AIMessage)
        if reply.tool_calls:
            yield ChatGenerationChunk(message=AIMessageChunk(**reply.model_dump(exclude={"type"})))
            return
        pieces = re.findall(r"\S+\s*", reply.text) or [""]
        for index, piece in enumerate(pieces, start=1):
            last = index == len(pieces)
            chunk = AIMessageChunk(
                content=piece,
                id=reply.id,
                usage_metadata=reply.usage_metadata if last else None,
                response_metadata=reply.response_metadata if last else {},
            )
            if run_manager:
                run_manager.on_llm_new_token(piece, chunk=ChatGenerationChunk(message=chunk))
            yield ChatGenerationChunk(message=chunk)

    def _reply(self, messages: list[BaseMessage], tool_names: set[str]) -> AIMessage:
        last_user = max(
            (i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=None
        )
        if last_user is None:
            return AIMessage(content="How can I help?")
        question = strip_author(message_text(messages[last_user]))
        this_turn = [m for m in messages[last_user + 1 :] if isinstance(m, ToolMessage)]
        decider = self._decider()
        if not this_turn:
            if fact := remembered(question):
                language = decider.language(question).language
                return AIMessage(content=noted_reply(language, fact, _saved_place(messages)))
            decision = decider.decide(question)
            if decider.is_smalltalk(decision, question):
                return AIMessage(content=smalltalk_reply(decision.language))
        searches = [m for m in this_turn if m.name in (SEARCH_TOOL, None)]
        passages = [p for result in searches for p in (result.artifact or [])]
        if not passages and any(m.status == "error" for m in searches):
            return AIMessage(content=CANNOT_SEARCH)  # the tool's retries are used up
        earlier = [m for m in messages[:last_user] if isinstance(m, HumanMessage)]
        previous = strip_author(message_text(earlier[-1])) if earlier else None
        if SEARCH_TOOL in tool_names and len(searches) < self._searches_for(question):
            queries = self._queries(question, previous, passages)
            if len(searches) < len(queries):
                return self._call(SEARCH_TOOL, "query", queries[len(searches)], len(messages))
        asked_expert = any(m.name == EXPERT_TOOL for m in this_turn)
        if EXPERT_TOOL in tool_names and not asked_expert and self._unsure(question, passages):
            return self._call(EXPERT_TOOL, "question", question, len(messages))
        experts = [message_text(m) for m in this_turn if m.name == EXPERT_TOOL]
        language = decider.language(question).language
        return AIMessage(content=self._answer(question, previous, passages, experts, language))

    def _decider(self) -> MessageDecider:
        return self.decider or decider_for(DEFAULT_EMBEDDER, DecisionSettings())

    def _searches_for(self, question: str) -> int:
        fewest, most = self.searches_per_question
        if fewest == most:
            return most
        return random.Random(f"{self.seed}\0{question}").randint(fewest, most)

    @staticmethod
    def _queries(question: str, previous: str | None, passages: list[dict[str, Any]]) -> list[str]:
        """The question (a follow-up with the previous message's topic before it), then
        reformulations: with the previous message's words, with the best heading found so
        far, keywords."""
        words = keywords(question)
        candidates = [contextual_query(question, previous)]
        if previous:
            candidates.append(f"{keywords(previous)} {words}")
        if passages:
            candidates.append(f"{words} {keywords(passages[0].get('heading', ''))}")
        candidates.append(words)
        return list(dict.fromkeys(c.strip() for c in candidates if c.strip()))

    def _unsure(self, question: str, passages: list[dict[str, Any]]) -> bool:
        asked = words_of(question)
        best = max((len(asked & words_of(passage_text(p))) for p in passages), default=0)
        return best < self.ask_expert_below_shared_words

    @staticmethod
    def _call(tool: str, argument: str, value: str, position: int) -> AIMessage:
        call_id = hashlib.sha1(f"{position}:{value}".encode()).hexdigest()[:16]
        return AIMessage(
            content="", tool_calls=[{"name": tool, "args": {argument: value}, "id": call_id}]
        )

    def relevant(self, question: str, previous: str | None, passage: dict[str, Any]) -> bool:
        """A passage the search tool scored is relevant (the tool returns only those above
        the knowledge base's threshold); one without a similarity shares
        `min_shared_words` of the question's content words (a follow-up's that many of
        the previous user message's, where it names its topic)."""
        if passage.get("similarity") or passage.get("score"):
            return True
        words = stems_of(passage_text(passage))
        if len(stems_of(question) & words) >= self.min_shared_words:
            return True
        return bool(previous) and len(stems_of(previous or "") & words) >= self.min_shared_words

    def _answer(
        self,
        question: str,
        previous: str | None,
        passages: list[dict[str, Any]],
        experts: list[str],
        language: str,
    ) -> str:
        expert_note = "".join(f"\n\nExpert: {self._first_sentences(e)}" for e in experts)
        offered = [p for p in passages if p.get(SUGGESTED)]
        answering = [p for p in passages if not p.get(SUGGESTED)]
        relevant = [p for p in answering if self.relevant(question, previous, p)]
        # retrieval order, pages in the asker's language first (manuals come in several)
        relevant.sort(key=lambda p: _page_language(p) not in (language, UNKNOWN_LANGUAGE))
        for passage in relevant:
            quoted = self._quote(question, passage)
            if quoted:
                return f"{quoted}\n\n{see_also(language, section_name(passage))}{expert_note}"
        if offered and not experts:
            pages = list(dict.fromkeys(str(p["title"]) for p in offered))[:OFFERED_PAGES]
            return unsure_reply(language, pages)
        return not_found_reply(language, suggest=not experts) + expert_note

    def _quote(self, question: str, passage: dict[str, Any]) -> str:
        """A team answer whole, as the team wrote it; a page's steps or best sentences."""
        if is_team_answer(str(passage.get("source", ""))):
            return answer_text(passage["text"])
        return excerpt(
            question, passage["text"], sentences=self.answer_sentences, max_steps=self.max_steps
        )

    def _first_sentences(self, text: str) -> str:
        return " ".join(sentences_of(text)[: self.answer_sentences])
