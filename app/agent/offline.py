"""The offline chat model: deterministic, no key, no network, drives the real agent loop.

On a new user message it calls `search_knowledge_base` with the question; given the
search results of this turn it answers with the best-matching sentences of the top
passages and cites them. Token usage is counted with the service's tokenizer.
"""

import hashlib
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
_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
NOT_FOUND = "I could not find this in the knowledge base."


def _words(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(text) if len(word) > 2}


class OfflineChatModel(BaseChatModel):
    """A real LangChain chat model that needs no provider; see the module docstring."""

    model_name: str = "offline"
    answer_sentences: int = 3

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
        results = [m for m in messages[last_user + 1 :] if isinstance(m, ToolMessage)]
        if not results and SEARCH_TOOL in tool_names:
            call_id = hashlib.sha1(f"{len(messages)}:{question}".encode()).hexdigest()[:16]
            return AIMessage(
                content="",
                tool_calls=[{"name": SEARCH_TOOL, "args": {"query": question}, "id": call_id}],
            )
        return AIMessage(content=self._answer(question, results))

    def _answer(self, question: str, results: list[ToolMessage]) -> str:
        passages = [p for result in results for p in (result.artifact or [])]
        if not passages:
            return NOT_FOUND
        asked = _words(question)
        best = passages[0]
        sentences = [s.strip() for s in _SENTENCE_END.split(best["text"]) if s.strip()]
        ranked = sorted(sentences, key=lambda s: len(asked & _words(s)), reverse=True)
        chosen = set(ranked[: self.answer_sentences])
        excerpt = " ".join(s for s in sentences if s in chosen)  # keep the document's order
        return f"{excerpt}\n\nSource: {best['title']} ({best['source']})"
