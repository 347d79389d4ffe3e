"""The main agent's tools, and what the agent is told when one of them stays down."""

from collections.abc import Callable
from dataclasses import asdict

from langchain.agents.middleware import ToolRetryMiddleware
from langchain_core.tools import BaseTool, tool

from app.settings import LLMSettings
from knowledge.evidence import MIN_COVERAGE, QUOTE_COVERAGE, holds, leads
from knowledge.format import format_passages
from knowledge.keywords import query_language
from knowledge.loaders import UNKNOWN_LANGUAGE
from knowledge.relevance import RelevanceThresholds
from knowledge.scope import DocumentationScope
from knowledge.types import Passage, Retriever

KNOWLEDGE_TOOL = "search_knowledge_base"
ASK_EXPERT = "ask_expert"  # app/agent/expert: offered when a web search backend is set
# What a tool returns once its retries are used up: the model answers without it, and says so.
UNAVAILABLE = {
    KNOWLEDGE_TOOL: "The knowledge base is unavailable right now. Answer without it and tell "
    "the user that you cannot search the help center at the moment.",
    ASK_EXPERT: "Web research is unavailable right now. Answer without it and tell the user "
    "that you cannot research this on the web at the moment.",
}


# The names a model knows best for the documentation languages one is likely to configure.
LANGUAGE_NAMES = {
    "da": "Danish",
    "de": "German",
    "en": "English",
    "es": "Spanish",
    "fi": "Finnish",
    "fr": "French",
    "it": "Italian",
    "ja": "Japanese",
    "nl": "Dutch",
    "no": "Norwegian",
    "pl": "Polish",
    "pt": "Portuguese",
    "ru": "Russian",
    "sv": "Swedish",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "zh": "Chinese",
}


def search_description(language: str) -> str:
    """The search tool's description: it names the documentation's language, because a
    query in it finds the right page far more often than the user's words in another
    language (docs/knowledge.md)."""
    name = LANGUAGE_NAMES.get(language, language)
    return (
        f"Search the product's help center, which is written in {name}. Write the query in "
        f"{name} even when the user writes in another language (translate their question), "
        "short and specific, in the documentation's terms; for a follow-up, include what it "
        "refers to. Returns numbered passages with their sources. Answer in the user's "
        "language."
    )


def relevant_passages(passages: list[Passage], min_similarity: float) -> list[Passage]:
    """The passages whose dense similarity reaches the knowledge base's threshold (with no
    threshold, every passage)."""
    return [p for p in passages if p.similarity >= min_similarity]


# The artifact key of a passage offered as possibly related: it passed the threshold but
# does not hold what the query asks (knowledge/evidence.py). A search that returns only
# such passages found nothing (the turn's outcome is `not_found`).
SUGGESTED = "suggested"
NOTHING_ANSWERS = (
    "No passage of the documentation answers this. Pages that may be related, to offer the "
    "user as suggestions without quoting them as the answer:"
)


def answering_passages(
    query: str,
    relevant: list[Passage],
    found: list[Passage],
    documentation_language: str,
    min_coverage: float = MIN_COVERAGE,
) -> list[Passage]:
    """The relevant passages that hold `min_coverage` of what the query asks
    (knowledge/evidence.py), when the first of them leads every other page's passage among
    all `found`; else none."""
    language = query_language(query, documentation_language)
    answering = [
        p
        for p in relevant
        if holds(query, language, p, _language_of(p, documentation_language), min_coverage)
    ]
    return answering if answering and leads(answering[0], found) else []


def _one_per_page(passages: list[Passage]) -> list[Passage]:
    """The best passage of each page, best first."""
    best: dict[str, Passage] = {}
    for passage in passages:
        best.setdefault(passage.source, passage)
    return list(best.values())


def _language_of(passage: Passage, documentation_language: str) -> str:
    """A page's language; the documentation's when the retriever or the page did not say."""
    return (
        passage.language
        if passage.language not in ("", UNKNOWN_LANGUAGE)
        else documentation_language
    )


def suggestions_text(passages: list[Passage]) -> str:
    lines = [f"{n}. {p.title} (source: {p.source})" for n, p in enumerate(passages, start=1)]
    return "\n".join([NOTHING_ANSWERS, *lines])


def knowledge_search_tool(
    retriever: Retriever,
    k: int,
    token_budget: int | None,
    language: str = "en",
    relevance: Callable[[], RelevanceThresholds | None] | None = None,
    scope: DocumentationScope | None = None,
    quotable: Callable[[str], bool] | None = None,
) -> BaseTool:
    """The search tool: only relevant passages that hold what the query asks
    (`MIN_COVERAGE` of its words) reach the model as passages (and the turn's citations);
    when none does but one page passed the "related" threshold, the pages found are
    offered as possibly related (`SUGGESTED`), in search order; none tells it that the
    documentation has nothing on the query, as does a query outside the collection's
    `scope` (when it has one). `quotable` is given for a model that quotes passages as they
    stand (the offline model): whether a passage's text has anything to quote; such a
    model is handed only passages that have and that hold every word asked
    (`QUOTE_COVERAGE`), the others are offered. `relevance` gives
    the thresholds in force (the collection's calibration, or the configured ones);
    without any (a collection not calibrated yet, a retriever that keeps no calibration)
    every passage found is passed on, as found. `token_budget` None: found passages are
    left for `ResultBudgetMiddleware` to render (the result's text is empty until then),
    under the memory profile's budget, rather than rendered twice."""

    min_coverage = MIN_COVERAGE if quotable is None else QUOTE_COVERAGE

    @tool(
        KNOWLEDGE_TOOL,
        description=search_description(language),
        response_format="content_and_artifact",
    )
    def search_knowledge_base(query: str) -> tuple[str, list[dict[str, object]]]:
        thresholds = relevance() if relevance else None
        found = retriever.search(query, k)
        threshold = thresholds.for_query(query) if thresholds else 0.0
        passages = relevant_passages(found, threshold)
        if passages and scope is not None and not scope.covers(query):
            found = passages = []
        answering = (
            answering_passages(query, passages, found, language, min_coverage)
            if thresholds
            else passages
        )
        if quotable is not None:
            answering = [p for p in answering if quotable(p.text)]
        if not answering:
            near = thresholds.related_for_query(query) if thresholds else 0.0
            # One page near enough to be related: the pages found with it are offered in
            # search order, up to the reply's three. A page the keywords rank high may lie
            # below the threshold by its cosine (or have none, found by BM25 alone), and
            # is as likely as the nearest page to be the one asked about.
            related = _one_per_page(found) if relevant_passages(found, near) else []
            if related:
                suggested = [asdict(p) | {SUGGESTED: True} for p in related]
                return suggestions_text(related), suggested
        text = (
            ""
            if answering and token_budget is None
            else format_passages(query, answering, token_budget or 0)
        )
        return text, [asdict(p) for p in answering]

    return search_knowledge_base


class ToolRetry(ToolRetryMiddleware):
    """LangChain's ToolRetryMiddleware for one tool, ending in that tool's `UNAVAILABLE`
    note rather than the exception's text (which may hold internal addresses)."""

    def __init__(self, tool_name: str, llm: LLMSettings) -> None:
        note = UNAVAILABLE[tool_name]
        super().__init__(
            tools=[tool_name],
            max_retries=llm.tool_max_retries,
            on_failure=lambda _error: note,
            initial_delay=llm.retry_initial_delay_seconds,
            max_delay=llm.retry_max_delay_seconds,
        )
        self.tool_name = tool_name

    @property
    def name(self) -> str:  # create_agent wants one name per middleware instance
        return f"ToolRetry[{self.tool_name}]"


def tool_retry_middleware(llm: LLMSettings) -> list[ToolRetry]:
    return [ToolRetry(name, llm) for name in UNAVAILABLE]
