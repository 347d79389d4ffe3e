"""How the offline model's answers read: small talk, steps with menu paths, one page named,
and "not in the documentation" when the search returned nothing relevant (the search
tool's threshold decides that: tests/agent/test_search_tool.py)."""

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool

from app.agent.offline import NOT_FOUND, SEARCH_TOOL, OfflineChatModel
from app.memory.kept import memory_note

INVOICE_STEPS = {
    "text": "To send an invoice to a customer you must first create one.\n\n"
    "Create the invoice like this:\n\n"
    "1. Open **Business → Customer → New Invoice**.\n"
    "2. Pick the customer and the date opened.\n"
    "3. Click **OK**: the Edit Invoice window opens.\n"
    "4. Add the line items, then press **Post** .\n\n"
    "> Note:\n>\n> An invoice that is not posted can still be edited.",
    "title": "Invoices",
    "heading": "Business Features > Invoices > New",
    "source": "help/invoices.html",
    "score": 0.9,
}
USER_ROLES = {
    "text": "An administrator can invite users and give each one a role. Owners manage "
    "billing; accountants see every report; viewers only read.",
    "title": "Users and roles",
    "heading": "Users and roles",
    "source": "help/users.html",
    "score": 0.86,
}
TAX_FACTS = {
    "text": "Sales tax tables hold the rates GnuCash applies to invoices. Each entry has a "
    "type, Percent % or Value $, and the liability account the tax is posted to. A "
    "customer can have a default tax table. Bills use the same tables.",
    "title": "Sales Tax Tables",
    "heading": "Business Setup > Sales Tax Tables",
    "source": "help/tax-tables.html",
    "score": 0.88,
}


@tool(SEARCH_TOOL)
def search_knowledge_base(query: str) -> str:
    """Search the help center."""
    return query


def turn(
    question: str, passages: list[dict[str, object]], model: OfflineChatModel | None = None
) -> tuple[list[str], str]:
    """The searches the model makes for `question` (each answered with `passages`), then
    its answer."""
    bound = (model or OfflineChatModel()).bind_tools([search_knowledge_base])
    messages: list[BaseMessage] = [HumanMessage(f"Ann: {question}")]
    searched: list[str] = []
    for _ in range(4):
        reply = bound.invoke(messages)
        assert isinstance(reply, AIMessage)
        if not reply.tool_calls:
            return searched, reply.text
        call = reply.tool_calls[0]
        searched.append(call["args"]["query"])
        messages += [
            reply,
            ToolMessage("…", tool_call_id=call["id"], name=SEARCH_TOOL, artifact=passages),
        ]
    raise AssertionError("the model never answered")


def test_numbered_steps_are_kept_in_order_with_their_menu_path() -> None:
    searched, answer = turn("How do I create an invoice for a customer?", [INVOICE_STEPS])

    assert searched == ["How do I create an invoice for a customer?"]
    assert answer.splitlines()[:5] == [
        "Create the invoice like this:",
        "1. Open Business → Customer → New Invoice.",
        "2. Pick the customer and the date opened.",
        "3. Click OK: the Edit Invoice window opens.",
        "4. Add the line items, then press Post.",
    ]


def test_the_answer_names_one_page_and_section_and_has_no_source_line_of_its_own() -> None:
    _, answer = turn("How do I create an invoice?", [INVOICE_STEPS, TAX_FACTS])

    assert "Source" not in answer
    assert answer.count("“Invoices › New”") == 1 and "Sales Tax Tables" not in answer
    assert answer.endswith("Details: “Invoices › New”.")  # the page, then its section


def test_without_steps_it_quotes_the_best_matching_sentences_in_order() -> None:
    model = OfflineChatModel(answer_sentences=2)
    _, answer = turn("Which liability account is the sales tax posted to?", [TAX_FACTS], model)

    first = answer.split("\n\n")[0]
    assert first == (
        "Sales tax tables hold the rates GnuCash applies to invoices. Each entry has a "
        "type, Percent % or Value $, and the liability account the tax is posted to."
    )


def test_a_table_is_quoted_by_its_rows_that_fit_the_question() -> None:
    shortcuts = {
        "text": "| Key | Action |\n|---|---|\n| F3 | View file |\n"
        "| Ctrl+U | Swap panels (the left panel's directory swaps with the right one's) |\n"
        "| Ctrl+Q | Quick view of the selected file |",
        "title": "Shortcuts",
        "heading": "Shortcuts > Main window",
        "source": "help/shortcuts.html",
        "score": 0.9,
    }
    model = OfflineChatModel(answer_sentences=1)
    _, answer = turn("keyboard shortcut to swap the left and right panel?", [shortcuts], model)

    assert answer.split("\n\n")[0] == (
        "- Ctrl+U | Swap panels (the left panel's directory swaps with the right one's)"
    )


def test_when_the_search_returns_nothing_relevant_the_documentation_is_said_to_lack_it() -> None:
    _, answer = turn("What will the weather be like in Berlin tomorrow?", [])

    assert answer.startswith(NOT_FOUND)
    assert "rephrase" in answer and "person" in answer


def test_a_passage_the_search_scored_is_quoted_one_without_a_score_needs_shared_words() -> None:
    question = "Which role do users need to see a report?"
    assert "viewers only read" in turn(question, [USER_ROLES])[1]
    unscored = {**USER_ROLES, "score": 0.0}  # a retriever that gives no score
    assert "viewers only read" in turn(question, [unscored])[1]
    unrelated = "What will the weather be like in Berlin tomorrow?"
    assert turn(unrelated, [unscored])[1].startswith(NOT_FOUND)


def test_not_found_is_said_in_the_askers_language_english_where_it_has_no_wording() -> None:
    assert turn("Wie wird das Wetter morgen in Berlin?", [])[1].startswith(
        "Dazu habe ich in der Dokumentation nichts gefunden."
    )
    assert turn("Какая завтра погода в Берлине?", [])[1].startswith(
        "Я не нашёл этого в документации."
    )
    assert turn("Quel temps fera-t-il demain à Berlin ?", [])[1].startswith(NOT_FOUND)


def test_small_talk_gets_a_short_reply_in_the_askers_language_and_no_search() -> None:
    for greeting, reply in [
        ("Good morning everyone 👋", "Glad to help!"),
        ("Guten Morgen zusammen!", "Gern!"),
        ("Привет!", "Рад помочь!"),
        ("thanks, super helpful 🙏", "Glad to help!"),
    ]:
        searched, answer = turn(greeting, [INVOICE_STEPS])
        assert searched == [] and answer.startswith(reply), greeting
        assert len(answer.split()) <= 20


def test_remember_that_is_noted_not_searched_and_a_question_about_remembering_is() -> None:
    searched, answer = turn("Remember that our invoices are in CHF.", [INVOICE_STEPS])
    assert searched == [] and answer == (
        "I will keep this in mind for this conversation only: our invoices are in CHF. "
        "Nothing is saved for your next conversations."
    )
    question = "How do I make GnuCash remember my last invoice number?"
    assert turn(question, [INVOICE_STEPS])[0] == [question]


def test_remember_that_is_noted_where_the_memory_note_says_it_is_saved() -> None:
    remember = HumanMessage("Ann: remember that wir nutzen GnuCash 5 für unsere Buchhaltung")
    for scope, expected in [
        ("api|shop|u-1", "Saved to your memory (person “u-1”)"),
        ("widget|alice", "Saved to your memory (staff member “alice”)"),
        ("telegram|7|9", "Saved to your memory (this Telegram chat)"),
    ]:
        system = SystemMessage([text_block("prompt"), text_block(memory_note(scope))])
        answer = OfflineChatModel().invoke([system, HumanMessage("Ann: remember that I use Linux")])
        assert answer.text == (
            f"Noted: I use Linux. {expected}: I will remember it in your next conversations too."
        ), scope
    only = SystemMessage([text_block("prompt"), text_block(memory_note(None))])
    assert OfflineChatModel().invoke([only, remember]).text.startswith("Das behalte ich nur")
    # The note counts only where it opens a block: quoted inside one, it saves nothing.
    quoted = SystemMessage(f"prompt\n{memory_note('api|shop|u-1')}")
    assert "Saved" not in OfflineChatModel().invoke([quoted, remember]).text


def text_block(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def test_a_greeting_or_thanks_with_a_problem_is_searched_and_answered() -> None:
    for message in [
        "Hi! How do I create an invoice?",
        "Hello, my new invoice for the customer is not created.",
        "Thanks, but the invoice still won't create for this customer",
    ]:
        searched, answer = turn(message, [INVOICE_STEPS])
        assert searched == [message], message
        assert "1. Open Business → Customer → New Invoice." in answer, message


def test_a_question_with_current_or_latest_near_a_number_is_answered_from_the_page() -> None:
    searched, answer = turn("The current sales tax on my invoice is 1.50 too high", [TAX_FACTS])

    assert searched and not answer.startswith(NOT_FOUND)
    assert "Sales Tax Tables" in answer


def test_the_answer_streams_in_pieces_that_join_to_the_whole() -> None:
    call = AIMessage(
        "", tool_calls=[{"name": SEARCH_TOOL, "args": {"query": "invoice"}, "id": "c1"}]
    )
    messages: list[BaseMessage] = [
        HumanMessage("Ann: How do I create an invoice?"),
        call,
        ToolMessage("…", tool_call_id="c1", name=SEARCH_TOOL, artifact=[INVOICE_STEPS]),
    ]
    model = OfflineChatModel()
    chunks = list(model.bind_tools([search_knowledge_base]).stream(messages))

    assert len(chunks) > 5 and all(isinstance(c, AIMessageChunk) for c in chunks)
    assert "".join(str(c.content) for c in chunks) == model.invoke(messages).text
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk  # type: ignore[assignment]  # chunks add up to a chunk
    assert whole.usage_metadata and whole.usage_metadata["output_tokens"] > 0


PAYMENTS = {
    "text": "Partial payments are possible too. Select the invoice to pay: GnuCash suggests "
    "the remaining balance as payment amount.",
    "title": "Process Invoice Payment",
    "heading": "Business Features > Invoices > Payment",
    "source": "help/payment.html",
    "score": 0.85,
}


def test_a_follow_up_is_answered_from_a_page_on_the_previous_messages_topic() -> None:
    bound = OfflineChatModel().bind_tools([search_knowledge_base])
    messages: list[BaseMessage] = [
        HumanMessage("Ann: How do I record the payment of an invoice?"),
        AIMessage("Use Process Payment."),
        HumanMessage("Ann: what if they only sent half of it?"),
    ]
    call = bound.invoke(messages)
    assert isinstance(call, AIMessage) and call.tool_calls
    messages += [
        call,
        ToolMessage(
            "…", tool_call_id=call.tool_calls[0]["id"], name=SEARCH_TOOL, artifact=[PAYMENTS]
        ),
    ]

    assert bound.invoke(messages).text.startswith("Partial payments are possible too.")
    # asked on its own, an unscored page shares no word with the question
    unscored = {**PAYMENTS, "score": 0.0}
    assert turn("what if they only sent half of it?", [unscored])[1].startswith(NOT_FOUND)
