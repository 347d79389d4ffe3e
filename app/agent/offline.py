"""The offline chat model: deterministic, no key, no network, drives the real agent loop.

On a new user message it calls `search_knowledge_base` with the question; given the
search results of this turn it answers with the best-matching sentences of the top
passages and cites them. Token usage is counted with the service's tokenizer.

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
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from app.agent.messages import count_message_tokens, message_text, strip_author
from app.observability.simulator import request_tokens

SEARCH_TOOL = "search_knowledge_base"
EXPERT_TOOL = "ask_expert"
_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_MARKUP = re.compile(r"\*\*|__|`|^\s*(?:[-*+]|\d+\.)\s+|^#+\s+")
NOT_FOUND = "I could not find this in the knowledge base."
CANNOT_SEARCH = "I cannot search the knowledge base right now. Please try again later."


# Words a reformulated query leaves out: they match every page equally.
# fmt: off
_STOPWORDS = frozenset({
    "the", "and", "for", "are", "but", "not", "you", "your", "our", "out", "can", "how",
    "what", "when", "where", "which", "who", "why", "with", "this", "that", "these", "those",
    "there", "then", "them", "they", "have", "has", "had", "does", "did", "was", "were",
    "will", "would", "should", "could", "into", "from", "about", "also", "just", "only",
    "some", "any", "all", "its", "don", "isn", "gnucash", "please", "thanks",
})
# fmt: on


def sentences_of(text: str) -> list[str]:
    """The sentences of a passage as a reader would quote them: no Markdown emphasis, no
    list numbers, and no headings or other fragments (fewer than three words, or a short
    line with no closing punctuation)."""
    pieces = (_MARKUP.sub("", piece).strip() for piece in _SENTENCE_END.split(text))
    return [
        piece
        for piece in pieces
        if len(words := piece.split()) >= 3 and (piece[-1] in ".!?:" or len(words) >= 8)
    ]


def _words(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(text) if len(word) > 2}


def content_words(text: str) -> list[str]:
    """The text's words that say what it is about, lowercase, in order, once each."""
    words = [w.lower() for w in _WORD.findall(text) if len(w) > 2]
    return list(dict.fromkeys(w for w in words if w not in _STOPWORDS))


def _keywords(text: str) -> str:
    """A reformulated query: the content words alone."""
    return " ".join(content_words(text))


def _passage_words(passage: dict[str, Any]) -> set[str]:
    return _words(f"{passage.get('title', '')} {passage.get('heading', '')} {passage['text']}")


class OfflineChatModel(BaseChatModel):
    """A real LangChain chat model that needs no provider; see the module docstring."""

    model_name: str = "offline"
    answer_sentences: int = 3
    searches_per_question: tuple[int, int] = (1, 1)  # fewest, most
    seed: int = 0
    ask_expert_below_shared_words: int = 0  # 0: never ask

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
        searches = [m for m in this_turn if m.name in (SEARCH_TOOL, None)]
        passages = [p for result in searches for p in (result.artifact or [])]
        if not passages and any(m.status == "error" for m in searches):
            return AIMessage(content=CANNOT_SEARCH)  # the tool's retries are used up
        if SEARCH_TOOL in tool_names and len(searches) < self._searches_for(question):
            earlier = [m for m in messages[:last_user] if isinstance(m, HumanMessage)]
            previous = strip_author(message_text(earlier[-1])) if earlier else None
            queries = self._queries(question, previous, passages)
            if len(searches) < len(queries):
                return self._call(SEARCH_TOOL, "query", queries[len(searches)], len(messages))
        asked_expert = any(m.name == EXPERT_TOOL for m in this_turn)
        if EXPERT_TOOL in tool_names and not asked_expert and self._unsure(question, passages):
            return self._call(EXPERT_TOOL, "question", question, len(messages))
        experts = [message_text(m) for m in this_turn if m.name == EXPERT_TOOL]
        return AIMessage(content=self._answer(question, passages, experts))

    def _searches_for(self, question: str) -> int:
        fewest, most = self.searches_per_question
        if fewest == most:
            return most
        return random.Random(f"{self.seed}\0{question}").randint(fewest, most)

    @staticmethod
    def _queries(question: str, previous: str | None, passages: list[dict[str, Any]]) -> list[str]:
        """The question, then reformulations: with the previous message's words (a
        followup names its topic there), with the best heading found so far, keywords."""
        keywords = _keywords(question)
        candidates = [question]
        if previous:
            candidates.append(f"{_keywords(previous)} {keywords}")
        if passages:
            candidates.append(f"{keywords} {_keywords(passages[0].get('heading', ''))}")
        candidates.append(keywords)
        return list(dict.fromkeys(c.strip() for c in candidates if c.strip()))

    def _unsure(self, question: str, passages: list[dict[str, Any]]) -> bool:
        asked = _words(question)
        best = max((len(asked & _passage_words(p)) for p in passages), default=0)
        return best < self.ask_expert_below_shared_words

    @staticmethod
    def _call(tool: str, argument: str, value: str, position: int) -> AIMessage:
        call_id = hashlib.sha1(f"{position}:{value}".encode()).hexdigest()[:16]
        return AIMessage(
            content="", tool_calls=[{"name": tool, "args": {argument: value}, "id": call_id}]
        )

    def _answer(self, question: str, passages: list[dict[str, Any]], experts: list[str]) -> str:
        expert_note = "".join(f"\n\nExpert: {self._first_sentences(e)}" for e in experts)
        if not passages:
            return NOT_FOUND + expert_note
        asked = _words(question)
        best = passages[0]
        sentences = sentences_of(best["text"]) or [best["text"].strip()]
        ranked = sorted(sentences, key=lambda s: len(asked & _words(s)), reverse=True)
        chosen = set(ranked[: self.answer_sentences])
        excerpt = " ".join(s for s in sentences if s in chosen)  # keep the document's order
        return f"{excerpt}\n\nSource: {best['title']} ({best['source']}){expert_note}"

    def _first_sentences(self, text: str) -> str:
        return " ".join(sentences_of(text)[: self.answer_sentences])
