"""The offline chat model: deterministic, no key, no network, drives the real agent loop.

It answers like a help desk that works from the documentation:

- a greeting or a thank-you (English, German, Russian) gets a short reply in kind and no
  search;
- anything else is searched with `search_knowledge_base` (a follow-up such as "and for
  ATM withdrawals?" together with the previous question's topic,
  `knowledge.queries.contextual_query`); given this turn's passages it
  answers from the first relevant one, pages in the asker's language first: its numbered
  steps in order, menu paths (`Business → Customer → New Invoice`) as written, or else
  its sentences that best match the question. It names that page once, at the end, so
  the turn's citations are that page (the adapters list citations; the answer carries no
  "Source:" line of its own);
- when no passage is relevant enough it says it did not find this in the documentation
  and suggests rephrasing or asking a person, instead of quoting an unrelated page. A
  passage is relevant when its embedding similarity (in the tool's artifact; its score
  when it has none) reaches `min_score` and it shares `min_shared_words` of the
  question's content words (a follow-up's: of the previous user message's). `min_score`
  is calibrated for the default embedder (e5) on the dev scenarios with
  `supportbot eval answers` (evals/answers.py); retrievers that give no score (0.0, such
  as test doubles) are judged by words alone;
- asked which release is the newest or current, it says the documentation cannot tell
  (it describes one release) and points to the release notes.

Token usage is counted with the service's tokenizer.

Production agents search more than once per question and ask for help when the knowledge
base has nothing fitting; evals give the offline model that shape with two settings:
`searches_per_question` (fewest, most: the question, then reformulations of it, one
search per model call; the count is drawn per question from `seed`) and
`ask_expert_below_shared_words` (call `ask_expert`, when bound, if no passage found this
turn shares that many words with the question, or the question asks which release is
current). The defaults keep one search, no expert.
"""

import hashlib
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
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
from knowledge.keywords import query_language as language_of
from knowledge.loaders import UNKNOWN_LANGUAGE, language_from_path
from knowledge.queries import contextual_query

SEARCH_TOOL = "search_knowledge_base"
EXPERT_TOOL = "ask_expert"
_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_MARKUP = re.compile(r"\*\*|__|`|^\s*(?:[-*+]|\d+\.)\s+|^#+\s+")
_EMPHASIS = re.compile(r"\*\*|__|`")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+(?=[.,:;!?](?:\s|$))")
_STEP = re.compile(r"^\s*\d+[.)]\s+(.*)")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_HEADING = re.compile(r"^\s*#+\s")
MENU_ARROW = "→"
CANNOT_SEARCH = "I cannot search the knowledge base right now. Please try again later."

NOT_FOUND = "I could not find this in the documentation."
_NOT_FOUND = {
    "en": NOT_FOUND,
    "de": "Dazu habe ich in der Dokumentation nichts gefunden.",
    "ru": "Я не нашёл этого в документации.",
}
_TRY_AGAIN = {
    "en": "Could you rephrase it, for example with the name of the menu or window you are "
    "in? If the documentation does not cover it, a person from the support team can help.",
    "de": "Können Sie die Frage anders formulieren, etwa mit dem Namen des Menüs oder "
    "Fensters? Steht es nicht in der Dokumentation, hilft Ihnen eine Person aus dem "
    "Support-Team weiter.",
    "ru": "Попробуйте переформулировать вопрос, например назовите меню или окно. Если "
    "в документации этого нет, вам поможет сотрудник поддержки.",
}
_GREETING_REPLY = {
    "en": "Hello! Ask me how to do something and I will look it up in the documentation.",
    "de": "Hallo! Fragen Sie mich, wie etwas geht, und ich schlage es in der Dokumentation nach.",
    "ru": "Здравствуйте! Спросите, как что-то сделать, и я найду ответ в документации.",
}
_THANKS_REPLY = {
    "en": "You're welcome! Ask any time.",
    "de": "Gern geschehen! Fragen Sie jederzeit.",
    "ru": "Пожалуйста! Обращайтесь.",
}
_SEE_ALSO = {"en": "Details: “{page}”.", "de": "Mehr dazu: „{page}“.", "ru": "Подробнее: «{page}»."}
# Openers of a greeting or a thank-you, and the words that make the rest of the message a
# request after all ("Hi, how do I …?"), per language.
# fmt: off
_GREETINGS = {
    "en": ("hi", "hello", "hey", "hiya", "good morning", "good afternoon", "good evening",
           "greetings"),
    "de": ("hallo", "guten morgen", "guten tag", "guten abend", "moin", "servus", "grüß gott"),
    "ru": ("привет", "здравствуйте", "здравствуй", "добрый день", "доброе утро",
           "добрый вечер"),
}
_THANKS = {
    "en": ("thanks", "thank you", "thx", "cheers", "many thanks"),
    "de": ("danke", "vielen dank", "dankeschön"),
    "ru": ("спасибо", "благодарю"),
}
_REQUEST_WORDS = {
    "en": {"how", "where", "what", "which", "why", "when", "can", "could", "would", "should",
           "need", "want", "does", "do", "is there", "are there", "help me", "please"},
    "de": {"wie", "wo", "was", "welche", "welcher", "warum", "wann", "kann", "können",
           "muss", "brauche", "gibt es", "bitte"},
    "ru": {"как", "где", "что", "какой", "какая", "почему", "когда", "можно", "нужно",
           "надо", "помогите", "подскажите"},
}

# Words a reformulated query leaves out: they match every page equally.
_STOPWORDS = frozenset({
    "the", "and", "for", "are", "but", "not", "you", "your", "our", "out", "can", "how",
    "what", "when", "where", "which", "who", "why", "with", "this", "that", "these", "those",
    "there", "then", "them", "they", "have", "has", "had", "does", "did", "was", "were",
    "will", "would", "should", "could", "into", "from", "about", "also", "just", "only",
    "some", "any", "all", "its", "don", "isn", "gnucash", "please", "thanks",
})
# fmt: on
_SUFFIXES = ("ing", "ed", "es", "s")


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


def _stem(word: str) -> str:
    """Enough stemming to match `invoices` with `invoice` and `posted` with `post`."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)][:6]
    return word[:6]


def _stems(text: str) -> set[str]:
    return {_stem(word) for word in content_words(text)}


def _keywords(text: str) -> str:
    """A reformulated query: the content words alone."""
    return " ".join(content_words(text))


def _passage_words(passage: dict[str, Any]) -> set[str]:
    return _words(f"{passage.get('title', '')} {passage.get('heading', '')} {passage['text']}")


def _page_language(passage: dict[str, Any]) -> str:
    return language_from_path(Path(str(passage.get("source", ""))))


def _passage_stems(passage: dict[str, Any]) -> set[str]:
    return _stems(f"{passage.get('title', '')} {passage.get('heading', '')} {passage['text']}")


def _opener(text: str, openers: dict[str, tuple[str, ...]]) -> str | None:
    """The language of the greeting (or thanks) the message opens with, if any."""
    lowered = text.lower()
    for language, phrases in openers.items():
        for phrase in phrases:
            if re.match(rf"{re.escape(phrase)}(?!\w)", lowered):
                return language
    return None


def smalltalk_reply(text: str) -> str | None:
    """A short reply to a greeting or a thank-you that asks for nothing; else None."""
    for openers, replies in ((_GREETINGS, _GREETING_REPLY), (_THANKS, _THANKS_REPLY)):
        language = _opener(text.strip(), openers)
        if language is None:
            continue
        lowered = " ".join(_WORD.findall(text.lower()))
        if any(re.search(rf"\b{word}\b", lowered) for word in _REQUEST_WORDS[language]):
            return None
        return replies[language]
    return None


def not_found_reply(question: str, *, suggest: bool = True) -> str:
    language = language_of(question)
    return f"{_NOT_FOUND[language]} {_TRY_AGAIN[language]}" if suggest else _NOT_FOUND[language]


# The documentation describes one release: it cannot say which one is the newest. Asked
# when "newer", "latest", "current" … stands next to "version", "release", "installer" or
# "upgrade", or a few words before a version number.
_CURRENT = r"(?:newer|newest|latest|current|neuer\w*|neueste\w*|aktuell\w*|нов\w+|последн\w+)"
_RELEASE = r"(?:version\w*|release\w*|installer|upgrade|верси\w+)"
_WHAT_IS_CURRENT = re.compile(
    rf"\b{_CURRENT}(?:\W+\w+){{0,2}}\W+{_RELEASE}"
    rf"|\b{_RELEASE}(?:\W+\w+){{0,2}}\W+{_CURRENT}\b"
    rf"|\b{_CURRENT}(?:\W+\w+){{0,4}}\W+\d+\.(?:\d+|x)\b",
    re.IGNORECASE,
)
_CURRENT_RELEASE = {
    "en": "The documentation describes one release, so it cannot say which version is "
    "current: the product's website and release notes can.",
    "de": "Die Dokumentation beschreibt eine Version und kann daher nicht sagen, welche "
    "aktuell ist: Das steht auf der Website des Produkts und in den Release Notes.",
    "ru": "Документация описывает одну версию и не знает, какая версия сейчас актуальна: "
    "это есть на сайте продукта и в примечаниях к выпуску.",
}


def asks_what_is_current(question: str) -> bool:
    return bool(_WHAT_IS_CURRENT.search(question))


def current_release_reply(question: str) -> str:
    language = language_of(question)
    return f"{_NOT_FOUND[language]} {_CURRENT_RELEASE[language]}"


@dataclass(frozen=True)
class _Block:
    """A paragraph, a list item or a numbered step of a passage, as plain text."""

    kind: str  # "text", "bullet" or "step"
    text: str


def blocks_of(text: str) -> list[_Block]:
    """The passage's paragraphs and list items in order; emphasis markers go, menu paths
    and everything else stay as written."""
    blocks: list[list[str]] = []  # [kind, line, line, …]
    for raw in text.splitlines():
        line = _EMPHASIS.sub("", _QUOTE.sub("", raw)).rstrip()
        if not line.strip() or _HEADING.match(line) or line.lstrip().startswith("|"):
            blocks.append([])
            continue
        if step := _STEP.match(line):
            blocks.append(["step", step[1]])
        elif bullet := _BULLET.match(line):
            blocks.append(["bullet", bullet[1]])
        elif blocks and blocks[-1]:
            blocks[-1].append(line.strip())
        else:
            blocks.append(["text", line.strip()])
    return [
        _Block(block[0], _SPACE_BEFORE_PUNCTUATION.sub("", " ".join(block[1:])))
        for block in blocks
        if block
    ]


def _step_runs(blocks: list[_Block]) -> list[tuple[str | None, list[str]]]:
    """Each run of numbered steps with the sentence that leads into it (if any)."""
    runs: list[tuple[str | None, list[str]]] = []
    previous: _Block | None = None
    for block in blocks:
        if block.kind == "step":
            if previous is None or previous.kind != "step":
                lead = None
                if previous is not None and previous.kind == "text":
                    lead = (sentences_of(previous.text) or [previous.text])[-1]
                runs.append((lead, []))
            runs[-1][1].append(block.text)
        previous = block
    return runs


class OfflineChatModel(BaseChatModel):
    """A real LangChain chat model that needs no provider; see the module docstring."""

    model_name: str = "offline"
    answer_sentences: int = 3
    max_steps: int = 12
    # Relevance: see the module docstring and `supportbot eval answers`.
    min_score: float = 0.83
    min_shared_words: int = 1
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
        if not this_turn and (greeting := smalltalk_reply(question)):
            return AIMessage(content=greeting)
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
        unsure = self._unsure(question, passages) or asks_what_is_current(question)
        if EXPERT_TOOL in tool_names and not asked_expert and unsure:
            return self._call(EXPERT_TOOL, "question", question, len(messages))
        experts = [message_text(m) for m in this_turn if m.name == EXPERT_TOOL]
        return AIMessage(content=self._answer(question, previous, passages, experts))

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
        keywords = _keywords(question)
        candidates = [contextual_query(question, previous)]
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

    def relevant(self, question: str, previous: str | None, passage: dict[str, Any]) -> bool:
        """Relevant enough to answer from: its similarity, when it has one, reaches
        `min_score`, and it shares `min_shared_words` of the question's content words (a
        follow-up's that many of the previous user message's, where it names its topic)."""
        # the embedding's similarity: fused ranking scores (BM25 …) run higher
        score = float(passage.get("similarity") or passage.get("score") or 0.0)
        if score and score < self.min_score:
            return False
        words = _passage_stems(passage)
        if len(_stems(question) & words) >= self.min_shared_words:
            return True
        return bool(previous) and len(_stems(previous or "") & words) >= self.min_shared_words

    def _answer(
        self,
        question: str,
        previous: str | None,
        passages: list[dict[str, Any]],
        experts: list[str],
    ) -> str:
        expert_note = "".join(f"\n\nExpert: {self._first_sentences(e)}" for e in experts)
        if asks_what_is_current(question):
            return current_release_reply(question) + expert_note
        language = language_of(question)
        relevant = [p for p in passages if self.relevant(question, previous, p)]
        # retrieval order, pages in the asker's language first (manuals come in several)
        relevant.sort(key=lambda p: _page_language(p) not in (language, UNKNOWN_LANGUAGE))
        for passage in relevant:
            if excerpt := self._excerpt(question, passage):
                see = _SEE_ALSO[language].format(page=passage["title"])
                return f"{excerpt}\n\n{see}{expert_note}"
        return not_found_reply(question, suggest=not experts) + expert_note

    def _excerpt(self, question: str, passage: dict[str, Any]) -> str:
        """The passage's steps in order when it has steps that fit the question, else its
        best-matching sentences in the document's order; menu paths are kept as written.
        Empty when the passage has nothing to quote (a table, a list of links)."""
        asked = _stems(question)
        blocks = blocks_of(passage["text"])

        def fit(text: str) -> int:
            shared = len(asked & _stems(text))
            return shared + (1 if shared and MENU_ARROW in text else 0)

        runs = _step_runs(blocks)
        if runs:
            lead, steps = max(runs, key=lambda run: fit(" ".join([run[0] or "", *run[1]])))
            if fit(" ".join([lead or "", *steps])):
                numbered = [f"{n}. {step}" for n, step in enumerate(steps[: self.max_steps], 1)]
                return "\n".join([lead, *numbered] if lead else numbered)
        units = [
            (block.kind, sentence)
            for block in blocks
            if block.kind != "step"
            for sentence in ([block.text] if block.kind == "bullet" else sentences_of(block.text))
        ]
        ranked = sorted(range(len(units)), key=lambda i: fit(units[i][1]), reverse=True)
        best = ranked[: self.answer_sentences]
        fitting = [i for i in best if fit(units[i][1])]
        chosen = sorted(fitting or best)  # keep the document's order
        lines: list[str] = []
        for index in chosen:
            kind, text = units[index]
            if kind == "bullet":
                lines.append(f"- {text}")
            elif lines and not lines[-1].startswith("- "):
                lines[-1] += f" {text}"
            else:
                lines.append(text)
        return "\n".join(lines)

    def _first_sentences(self, text: str) -> str:
        return " ".join(sentences_of(text)[: self.answer_sentences])
