"""The offline model's production shape: reformulated searches, the expert when unsure."""

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from app.agent.offline import EXPERT_TOOL, SEARCH_TOOL, OfflineChatModel


@tool(SEARCH_TOOL)
def search_knowledge_base(query: str) -> str:
    """Search the help center."""
    return query


@tool(EXPERT_TOOL)
def ask_expert(question: str) -> str:
    """Ask the web-research expert."""
    return question


INVOICE = {
    "text": "Open Business → Customer → New Invoice.",
    "title": "Invoices",
    "heading": "New",
    "source": "invoices.html",
}


def result(call: AIMessage, passages: list[dict[str, str]]) -> ToolMessage:
    tool_call = call.tool_calls[0]
    return ToolMessage("…", tool_call_id=tool_call["id"], name=tool_call["name"], artifact=passages)


def play(model: OfflineChatModel, question: str, passages: list[dict[str, str]]) -> list[str]:
    """The tool calls the model makes for one question, then its answer."""
    bound = model.bind_tools([search_knowledge_base, ask_expert])
    messages: list[BaseMessage] = [
        HumanMessage("Ann: How do I pay a bill?"),
        AIMessage("Use Process Payment."),
        HumanMessage(f"Mark: {question}"),
    ]
    made: list[str] = []
    for _ in range(6):
        reply = bound.invoke(messages)
        assert isinstance(reply, AIMessage)
        messages.append(reply)
        if not reply.tool_calls:
            return [*made, reply.text]
        call = reply.tool_calls[0]
        made.append(f"{call['name']}: {next(iter(call['args'].values()))}")
        messages.append(result(reply, passages if call["name"] == SEARCH_TOOL else []))
    raise AssertionError("the model never answered")


def test_by_default_it_searches_once_and_never_asks_the_expert() -> None:
    made = play(OfflineChatModel(), "how do I write an invoice?", [])
    assert made[:-1] == [f"{SEARCH_TOOL}: how do I write an invoice?"]


def test_it_reformulates_with_the_previous_message_and_the_best_heading() -> None:
    model = OfflineChatModel(searches_per_question=(3, 3))
    made = play(model, "and for a customer invoice?", [INVOICE])
    assert made[:-1] == [
        f"{SEARCH_TOOL}: pay bill and for a customer invoice?",  # a follow-up: with its topic
        f"{SEARCH_TOOL}: pay bill customer invoice",
        f"{SEARCH_TOOL}: customer invoice new",
    ]
    assert made[-1].endswith("Details: “Invoices › New”.")  # the page and section it quoted


def test_the_number_of_searches_is_drawn_per_question_from_the_seed() -> None:
    questions = [f"question {n} about invoices?" for n in range(20)]

    def searches(seed: int) -> list[int]:
        model = OfflineChatModel(searches_per_question=(1, 3), seed=seed)
        return [len(play(model, q, [INVOICE])) - 1 for q in questions]

    assert set(searches(7)) == {1, 2, 3}
    assert searches(7) == searches(7)
    assert searches(7) != searches(8)


def test_it_asks_the_expert_when_no_passage_shares_enough_words() -> None:
    model = OfflineChatModel(ask_expert_below_shared_words=2)
    made = play(model, "is there a newer release than 4.x?", [INVOICE])
    assert made[1] == f"{EXPERT_TOOL}: is there a newer release than 4.x?"
    assert play(model, "where is the new invoice in business?", [INVOICE])[1].startswith(
        "Open Business"
    )
