"""The offline extractive summarizer: keeps what users stated, updates, never re-reads."""

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from app.agent.memory.summarizer import (
    ExtractiveSummaryModel,
    extractive_summary,
    render_for_summary,
    summary_request,
)
from app.agent.offline import NOT_FOUND


def exchange(n: int, author: str, text: str, answer: str) -> list[AnyMessage]:
    call = {"name": "search_knowledge_base", "args": {"query": text}, "id": f"c{n}"}
    return [
        HumanMessage(f"{author}: {text}", id=f"{n}1"),
        AIMessage("", tool_calls=[call], id=f"{n}2"),
        ToolMessage(
            "long passages",
            tool_call_id=f"c{n}",
            name=call["name"],
            artifact=[{}, {}, {}],
            id=f"{n}3",
        ),
        AIMessage(answer, id=f"{n}4"),
    ]


FIRST = [
    *exchange(1, "Anna", "Hi all, is this the help bot?", "Hello! How can I help?"),
    *exchange(
        2,
        "Anna",
        "ok context: we run GnuCash 4 on Linux (Ubuntu), we're a German GmbH, everything "
        "in EUR. Please keep answers short, we read this on our phones. Where do I set "
        "the default currency?",
        "Edit → Preferences → Accounts.",
    ),
]
SECOND = [
    *exchange(3, "Mark", "We need 19% and 7% VAT. Where do I set those rates up?", NOT_FOUND),
    *exchange(4, "Lena", "thanks! we'll switch to the CSV import next month.", "Good plan."),
]


def test_render_shows_results_as_their_description_with_recall_ids() -> None:
    lines = render_for_summary(FIRST[:4]).splitlines()
    assert lines == [
        "[#11 user] Anna: Hi all, is this the help bot?",
        "[#12 assistant] (calls search_knowledge_base({'query': 'Hi all, is this the help bot?'}))",
        '[#13 tool] search_knowledge_base("Hi all, is this the help bot?") → 3 passages, '
        "recall id 13",
        "[#14 assistant] Hello! How can I help?",
    ]


def test_keeps_stated_facts_and_constraints_and_indexes_questions() -> None:
    summary = extractive_summary("", render_for_summary(FIRST))
    assert summary.splitlines()[1:] == [
        "Participants: Anna",
        "Facts and constraints users stated:",
        "- Anna: ok context: we run GnuCash 4 on Linux (Ubuntu), we're a German GmbH, "
        "everything in EUR. (#21)",
        "- Anna: Please keep answers short, we read this on our phones. (#21)",
        "Decisions:",
        "- none",
        "Open questions:",
        "- none",
        "Topics:",
        "- Anna: Hi all, is this the help bot? (#11)",
        "- Anna: Where do I set the default currency? (#21)",
    ]


def test_the_next_fold_updates_the_previous_summary_with_the_new_messages_only() -> None:
    first = extractive_summary("", render_for_summary(FIRST))
    updated = extractive_summary(first, render_for_summary(SECOND))
    assert updated == extractive_summary(first, render_for_summary(SECOND))  # deterministic
    assert "Participants: Anna, Mark, Lena" in updated
    for line in first.splitlines()[3:5]:  # the facts stay, word for word
        assert line in updated.splitlines()
    assert "- Mark: We need 19% and 7% VAT. (#31)" in updated
    assert (
        "- Lena: we'll switch to the CSV import next month. (#41)" in updated.split("Decisions:")[1]
    )
    open_questions = updated.split("Open questions:")[1].split("Topics:")[0]
    assert "Mark: Where do I set those rates up? (#31)" in open_questions  # not answered


def test_the_summary_model_answers_a_summary_request() -> None:
    first = extractive_summary("", render_for_summary(FIRST))
    reply = ExtractiveSummaryModel().invoke(summary_request(first, SECOND))
    assert reply.text == extractive_summary(first, render_for_summary(SECOND))
    assert reply.usage_metadata is not None and reply.usage_metadata["input_tokens"] > 0


def test_a_statement_in_any_words_is_kept_as_a_fact_acknowledgements_and_questions_are_not() -> (
    None
):
    said: list[AnyMessage] = [
        HumanMessage(
            "Lea: Our club is a Swiss association that bills its members in francs.", id="1"
        ),
        AIMessage("Noted.", id="2"),
        HumanMessage("Lea: ok, thanks", id="3"),
        HumanMessage("Lea: Which report lists unpaid member fees?", id="4"),
        AIMessage(NOT_FOUND, id="5"),
    ]

    summary = extractive_summary("", render_for_summary(said))

    facts = summary.split("Facts and constraints users stated:")[1].split("Decisions:")[0]
    assert "Swiss association that bills its members in francs. (#1)" in facts
    assert "ok, thanks" not in summary and "unpaid member fees" not in facts
    open_questions = summary.split("Open questions:")[1].split("Topics:")[0]
    assert "Which report lists unpaid member fees? (#4)" in open_questions
