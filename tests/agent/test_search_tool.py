"""The search tool: it tells the model to query in the documentation's language, and only
passages relevant enough (the knowledge base's threshold) reach the model."""

from dataclasses import replace
from functools import partial

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

from app.agent.offline.passages import quotable
from app.agent.tools import knowledge_search_tool
from app.chat.outcome import outcome_of
from app.settings import KnowledgeSettings
from knowledge.relevance import RelevanceThresholds
from knowledge.types import Passage, Retriever


class _Recorder:
    def __init__(self) -> None:
        self.queries: list[str] = []

    def search(self, query: str, k: int) -> list[Passage]:
        self.queries.append(query)
        return [Passage(text="Use Business → Customer.", title="Customers", heading="", source="c")]


def test_the_description_names_the_documentation_language() -> None:
    english = knowledge_search_tool(_Recorder(), 4, 500)
    german = knowledge_search_tool(_Recorder(), 4, 500, language="de")
    assert "written in English. Write the query in English" in english.description
    assert "written in German. Write the query in German" in german.description
    assert "Answer in the user's language" in german.description


def test_the_tool_searches_the_query_as_given() -> None:
    retriever = _Recorder()
    result = knowledge_search_tool(retriever, 4, 500).invoke(
        {
            "type": "tool_call",
            "id": "1",
            "name": "search_knowledge_base",
            "args": {"query": "create a customer"},
        }
    )
    assert retriever.queries == ["create a customer"]
    assert "Customers" in result.content


def test_the_offline_model_searches_a_followup_with_the_previous_topic() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from app.agent.offline import OfflineChatModel

    model = OfflineChatModel().bind_tools([knowledge_search_tool(_Recorder(), 4, 500)])
    first = "Client paid invoice 412 by bank transfer. How do I record the payment?"
    standalone = model.invoke([HumanMessage(first)])
    assert isinstance(standalone, AIMessage)
    assert standalone.tool_calls[0]["args"]["query"] == first
    followup = model.invoke(
        [HumanMessage(first), AIMessage("Use Process Payment."), HumanMessage("what if only half?")]
    )
    assert isinstance(followup, AIMessage)
    query = followup.tool_calls[0]["args"]["query"]
    assert query.startswith("client paid invoice 412 bank transfer record payment")
    assert query.endswith("what if only half?")


class _Scored:
    """A retriever whose passages carry dense similarities."""

    def __init__(self, *similarities: float) -> None:
        self.similarities = similarities

    def search(self, query: str, k: int) -> list[Passage]:
        return [
            Passage(text=f"Passage {n}.", title=f"Page {n}", heading="", source=f"p{n}.html",
                    score=s, similarity=s)
            for n, s in enumerate(self.similarities)
        ]  # fmt: skip


def _call(tool: BaseTool, query: str = "q") -> ToolMessage:
    message = tool.invoke(
        {"type": "tool_call", "id": "1", "name": "search_knowledge_base", "args": {"query": query}}
    )
    assert isinstance(message, ToolMessage)
    return message


def _searched(
    retriever: Retriever, relevance: RelevanceThresholds, query: str = "q"
) -> ToolMessage:
    return _call(knowledge_search_tool(retriever, 4, 500, relevance=lambda: relevance), query)


def test_only_passages_at_or_above_the_threshold_reach_the_model_and_the_citations() -> None:
    result = _searched(_Scored(0.86, 0.80, 0.79), RelevanceThresholds(0.80))

    assert [p["source"] for p in result.artifact] == ["p0.html", "p1.html"]
    assert "Page 0" in result.content and "Page 2" not in result.content


def test_a_search_with_nothing_relevant_tells_the_model_so_and_cites_nothing() -> None:
    result = _searched(_Scored(0.78, 0.75), RelevanceThresholds(0.80))

    assert result.artifact == []
    assert str(result.content).startswith("No knowledge-base passages found")
    assert outcome_of([result]) == "not_found"
    assert outcome_of([_searched(_Scored(0.9), RelevanceThresholds(0.8))]) == "answered"


def test_passages_without_a_similarity_pass_no_threshold() -> None:
    """What a keyword search alone found carries no dense similarity (0.0): it never
    passes a threshold on a made-up number, and the search finds nothing."""
    result = _searched(_Recorder(), RelevanceThresholds(0.8))
    assert result.artifact == []
    assert outcome_of([result]) == "not_found"
    assert len(_searched(_Recorder(), RelevanceThresholds(0.0)).artifact) == 1  # no threshold


class _Pages:
    """A retriever returning fixed passages, all similar enough."""

    def __init__(self, *passages: Passage) -> None:
        self.passages = passages

    def search(self, query: str, k: int) -> list[Passage]:
        return list(self.passages)


_USERS = Passage(
    text="Invite a colleague from Settings → Users and give them the Accountant role.",
    title="Users, roles and permissions",
    heading="Users, roles and permissions > Invite a user",
    source="en/users-roles.md",
    score=0.87,
    similarity=0.87,
    language="en",
)
_PARTIAL = Passage(
    text="Enter the amount you actually received. The status changes to Partially paid.",
    title="Recording a customer payment",
    heading="Recording a customer payment > Record a partial payment",
    source="en/record-payment.md",
    score=0.9,
    similarity=0.9,
    language="en",
)


def test_a_near_passage_that_does_not_hold_the_question_is_only_offered() -> None:
    """Near in meaning, none of the question's words: the page is offered as possibly
    related, not quoted as the answer, and the turn found nothing."""
    result = _searched(
        _Pages(_USERS), RelevanceThresholds(0.8), "Do you support payroll in Brazil?"
    )

    assert [p["source"] for p in result.artifact] == ["en/users-roles.md"]
    assert all(p["suggested"] for p in result.artifact)
    assert "No passage of the documentation answers this" in str(result.content)
    assert outcome_of([result]) == "not_found"


def test_once_one_page_is_related_the_pages_found_with_it_are_offered_in_search_order() -> None:
    """Nothing answers; one page passes the "related" threshold: the pages found with it
    are offered in the search's order, the one BM25 alone found (no similarity) and the
    one below the threshold too. None passing it: nothing is offered."""
    keywords_only = Passage(
        text="Auto-save time interval.", title="Preferences", heading="", source="prefs.html",
        score=0.9, similarity=0.0, language="en",
    )  # fmt: skip
    below = Passage(
        text="Save the file.", title="Files", heading="", source="files.html",
        score=0.7, similarity=0.7, language="en",
    )  # fmt: skip
    relevance = RelevanceThresholds(0.95, related=RelevanceThresholds(0.8))
    question = "Do you support payroll in Brazil?"

    result = _searched(_Pages(keywords_only, _USERS, below), relevance, question)

    assert [p["source"] for p in result.artifact] == [
        "prefs.html",
        "en/users-roles.md",
        "files.html",
    ]
    assert all(p["suggested"] for p in result.artifact)
    assert outcome_of([result]) == "not_found"
    assert _searched(_Pages(keywords_only, below), relevance, question).artifact == []


def test_of_near_passages_those_holding_the_question_answer_it() -> None:
    result = _searched(
        _Pages(_USERS, _PARTIAL), RelevanceThresholds(0.8), "How do I record a partial payment?"
    )

    assert [p["source"] for p in result.artifact] == ["en/record-payment.md"]
    assert not any(p.get("suggested") for p in result.artifact)
    assert outcome_of([result]) == "answered"


def test_a_passage_holding_part_of_the_question_answers_a_model_that_reads_it_only() -> None:
    """Two of three asked words ("record", "partial"; not "refund"): a model that reads the
    passage is handed it; the offline model, which would quote it as the answer, gets the
    page offered."""
    question = "How do I record a partial refund?"
    tool = partial(knowledge_search_tool, _Pages(_USERS, _PARTIAL), 4, 500)
    relevance = RelevanceThresholds(0.8)

    reading = _call(tool(relevance=lambda: relevance), question)
    quoting = _call(tool(relevance=lambda: relevance, quotable=quotable), question)

    assert [(p["source"], p.get("suggested")) for p in reading.artifact] == [
        ("en/record-payment.md", None)
    ]
    assert outcome_of([reading]) == "answered"
    assert [p["source"] for p in quoting.artifact] == ["en/users-roles.md", "en/record-payment.md"]
    assert all(p["suggested"] for p in quoting.artifact)
    assert outcome_of([quoting]) == "not_found"


def test_a_passage_with_nothing_to_quote_is_offered_to_the_quoting_model() -> None:
    """A section that is only its headings holds every asked word in them: a model that
    reads it is handed it; the offline model, which has no sentence of it to quote, gets
    the page offered (the turn then says it is unsure, outcome `not_found`)."""
    headings_only = replace(_PARTIAL, text="### Partial payments\n\n#### Record one\n")
    question = "How do I record a partial payment?"
    tool = partial(knowledge_search_tool, _Pages(headings_only, _USERS), 4, 500)
    relevance = RelevanceThresholds(0.8)

    reading = _call(tool(relevance=lambda: relevance), question)
    quoting = _call(tool(relevance=lambda: relevance, quotable=quotable), question)

    assert [p["source"] for p in reading.artifact] == ["en/record-payment.md"]
    assert outcome_of([reading]) == "answered"
    assert all(p["suggested"] for p in quoting.artifact)
    assert outcome_of([quoting]) == "not_found"
    with_text = partial(knowledge_search_tool, _Pages(_PARTIAL, _USERS), 4, 500)
    quoted = _call(with_text(relevance=lambda: relevance, quotable=quotable), question)
    assert outcome_of([quoted]) == "answered"


def test_a_passage_in_another_language_than_the_question_is_only_offered() -> None:
    result = _searched(
        _Pages(_PARTIAL), RelevanceThresholds(0.8), "Wie erfasse ich eine Teilzahlung?"
    )
    assert [p["source"] for p in result.artifact] == ["en/record-payment.md"]
    assert all(p["suggested"] for p in result.artifact)
    assert outcome_of([result]) == "not_found"


def test_the_threshold_is_the_configured_embedders_for_the_querys_language() -> None:
    settings = KnowledgeSettings(
        embedder="e5", min_similarity={"e5": 0.81, "e5:ru": 0.77, "use": 0.4, "use:ru": 0.3}
    )
    e5 = settings.relevance_thresholds
    assert e5.for_query("How do I close the books at the end of the year?") == 0.81
    assert e5.for_query("Как закрыть книгу в конце года?") == 0.77
    assert e5.for_query("Wie schließe ich die Bücher am Jahresende ab?") == 0.81  # not listed
    assert settings.model_copy(update={"embedder": "use"}).relevance_thresholds.for_query(
        "Как закрыть книгу в конце года?"
    ) == pytest.approx(0.3)
    assert settings.model_copy(update={"embedder": "e5-float"}).relevance_thresholds.default == 0


def test_a_search_in_another_language_is_judged_by_that_languages_threshold() -> None:
    relevance = RelevanceThresholds(0.80, {"ru": 0.75})
    russian = "Как сверить банковский счёт с выпиской?"
    assert len(_searched(_Scored(0.78), relevance, russian).artifact) == 1
    english = "How do I reconcile my bank account with the statement?"
    assert _searched(_Scored(0.78), relevance, english).artifact == []


def test_a_holding_passage_in_a_near_tie_with_another_page_is_only_offered() -> None:
    """Two pages within a hair of each other: quoting the first would be a guess."""
    tied = Passage(
        text="Record the payment from the invoice.", title="Invoices", heading="Invoices",
        source="en/create-invoice.md", score=0.895, similarity=0.895, language="en",
    )  # fmt: skip
    result = _searched(
        _Pages(_PARTIAL, tied), RelevanceThresholds(0.8), "How do I record a partial payment?"
    )
    assert outcome_of([result]) == "not_found"
    assert [p["source"] for p in result.artifact] == [
        "en/record-payment.md",
        "en/create-invoice.md",
    ]


def test_pages_under_the_threshold_but_near_enough_are_offered_once_each() -> None:
    relevance = RelevanceThresholds(0.95, related=RelevanceThresholds(0.85))
    result = _searched(_Pages(_PARTIAL, _PARTIAL, _USERS), relevance, "partial payment?")
    assert [p["source"] for p in result.artifact] == ["en/record-payment.md", "en/users-roles.md"]
    assert outcome_of([result]) == "not_found"
    assert _searched(_Pages(_USERS), RelevanceThresholds(0.95), "payroll?").artifact == []
