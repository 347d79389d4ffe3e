"""A client conversation handed to a person and back, through ChatService and
HandoffService on SQLite, with the offline models (chat and summary)."""

import pytest
from langchain_core.messages import AIMessage
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.chat.service import ChatService
from app.chat.types import TurnRequest
from app.db.models import LLMCall
from app.handoff.card import HandoffCard
from app.handoff.service import HandoffService
from app.handoff.store import HandoffConflict
from app.settings import HandoffSettings, Settings
from tests.fakes import CapturingChatModel
from tests.handoff.conftest import OFFICE_CLOSED

KEY = "api:acme:1"


def said(text: str, *, author: str = "Ann", ask: bool = False) -> TurnRequest:
    return TurnRequest("api", KEY, "client", author, text, ask=ask)


async def test_asked_for_a_person_staff_take_over_and_hand_back(
    chat: ChatService, handoffs: HandoffService, model: CapturingChatModel, engine: AsyncEngine
) -> None:
    await chat.handle_turn(said("How do I create an invoice?"))
    await chat.handle_turn(said("We are a GmbH in Germany and must invoice in EUR.", author="Bob"))
    calls_before = len(model.calls)

    notice = await chat.handle_turn(said("Can I talk to a human?"))

    assert len(model.calls) == calls_before  # the keyword rule answered, not the model
    assert "person from our support team" in notice.text and "shortly" in notice.text
    assert (notice.outcome, notice.handoff) == ("handed_off", "open")
    (handoff,) = await handoffs.queue()
    assert (handoff.status, handoff.reason, handoff.requested_by) == ("open", "asked", "Ann")
    card = HandoffCard.from_json(handoff.card)
    assert any("GmbH in Germany and must invoice in EUR" in c for c in card.constraints)
    assert card.who == ["Ann", "Bob"] and card.conversation_key == KEY
    assert card.exchanges[0].asked == "Ann: How do I create an invoice?"
    assert "Sales → Invoices → New invoice" in card.exchanges[0].answered
    assert card.pages == ["Creating an invoice (en/create-invoice.md)"]
    assert card.transcript_url == f"/v1/conversations/{KEY}"
    async with engine.connect() as connection:
        purposes = (await connection.scalars(select(LLMCall.purpose))).all()
    assert purposes.count("handoff") == 1  # the card's one summary call, costed

    await chat.settled()  # the draft, made after the client was told
    drafted = await handoffs.get(handoff.id)
    assert drafted is not None and drafted.draft is not None
    assert drafted.draft["status"] == "drafted"
    assert len(model.calls) == calls_before + 2  # the draft's search and its answer

    quiet = await chat.handle_turn(said("Hello? Anyone there?"))
    assert quiet.text == "" and len(model.calls) == calls_before + 2
    assert (quiet.outcome, quiet.handoff) == ("quiet", "open")

    assert (await handoffs.claim(handoff.id, "alice")).status == "claimed"  # type: ignore[union-attr]
    with pytest.raises(HandoffConflict, match="claimed by alice"):
        await handoffs.claim(handoff.id, "bob")
    with pytest.raises(HandoffConflict, match="claimed by alice"):
        await handoffs.reply(handoff.id, "bob", "I'll take it")
    await handoffs.reply(handoff.id, "alice", "Hi Ann, I am Alice from support.")
    await handoffs.reply(handoff.id, "alice", "For a GmbH, set the tax rates first.")

    asked = await chat.handle_turn(said("/ask where do I set the VAT rates?", ask=True))
    assert "Settings → Taxes" in asked.text  # /ask is answered during the handoff
    assert (asked.outcome, asked.handoff) == ("answered", "claimed")

    resolved = await handoffs.resolve(handoff.id, "alice")
    assert resolved is not None and resolved.status == "resolved"
    answer = await chat.handle_turn(said("How do I record a payment?"))
    assert "Record payment" in answer.text and answer.handoff is None
    seen = [m for m in model.calls[-1].messages if isinstance(m, AIMessage)]
    staff_lines = [m.text for m in seen if "(support team)" in m.text]
    assert staff_lines == [
        "alice (support team): Hi Ann, I am Alice from support.",
        "alice (support team): For a GmbH, set the tax rates first.",
    ]

    found = await chat.history(KEY)
    assert found is not None
    transcript = [(m.role, m.author, m.content) for m in found[1] if m.role in ("user", "staff")]
    assert transcript[-5:] == [
        ("user", "Ann", "Hello? Anyone there?"),
        ("staff", "alice", "Hi Ann, I am Alice from support."),
        ("staff", "alice", "For a GmbH, set the tax rates first."),
        ("user", "Ann", "/ask where do I set the VAT rates?"),
        ("user", "Ann", "How do I record a payment?"),
    ]


async def test_two_answers_that_found_nothing_open_a_handoff(
    chat: ChatService, handoffs: HandoffService
) -> None:
    first = await chat.handle_turn(said("How do I export payroll?"))
    assert "could not find" in first.text and not await handoffs.queue()
    assert (first.outcome, first.handoff) == ("not_found", None)
    second = await chat.handle_turn(said("Payroll for freelancers?"))
    assert second.text.endswith("Until then I stay quiet here.")  # no /ask outside Telegram
    assert (second.outcome, second.handoff) == ("not_found", "open")
    (handoff,) = await handoffs.queue()
    assert handoff.reason == "not_found"
    assert HandoffCard.from_json(handoff.card).open_question.startswith("Ann: ")


async def test_two_thumbs_down_open_a_handoff(chat: ChatService, handoffs: HandoffService) -> None:
    await chat.handle_turn(said("How do I create an invoice?"))
    await chat.handle_turn(said("How do I record a payment?"))
    for number in (1, 2):
        found = await chat.find_turn(KEY, number)
        assert found is not None
        assert not await handoffs.queue()
        await chat.add_feedback(*found, helpful=False, comment=None, author="Ann")
    (handoff,) = await handoffs.queue()
    assert handoff.reason == "thumbs_down"


async def test_outside_office_hours_the_client_hears_when_the_shift_starts(
    settings: Settings, chat: ChatService, handoffs: HandoffService
) -> None:
    settings.handoff.timezone = "Europe/Berlin"
    handoffs._now = lambda: OFFICE_CLOSED
    notice = await chat.handle_turn(
        TurnRequest("api", "api:acme:de", "client", "Jens", "Einen Mitarbeiter bitte")
    )
    assert "nächste Schicht beginnt, Montag 09:00 (CET)" in notice.text


async def test_a_first_message_asking_for_a_person_names_who_on_the_card(
    chat: ChatService, handoffs: HandoffService
) -> None:
    await chat.handle_turn(said("Can I talk to a human?"))
    (handoff,) = await handoffs.queue()
    card = HandoffCard.from_json(handoff.card)
    assert card.who == ["Ann"] and card.requested_by == "Ann"
    assert (card.exchanges, card.pages, card.open_question) == ([], [], "")


async def test_without_a_model_the_cards_open_question_is_the_last_one_asked(
    chat: ChatService, handoffs: HandoffService
) -> None:
    await chat.handle_turn(said("How do I create an invoice?"))
    await chat.handle_turn(said("We are a GmbH in Germany and must invoice in EUR."))
    await chat.handle_turn(said("Can I talk to a human?"))
    (handoff,) = await handoffs.queue()
    card = HandoffCard.from_json(handoff.card)
    assert card.open_question == "Ann: How do I create an invoice? (#1)"


async def test_without_office_hours_configured_no_shift_is_announced(
    settings: Settings, chat: ChatService, handoffs: HandoffService
) -> None:
    settings.handoff.office_days = HandoffSettings().office_days  # the default: none
    handoffs._now = lambda: OFFICE_CLOSED
    notice = await chat.handle_turn(said("Can I talk to a human?"))
    assert notice.outcome == "handed_off"
    assert "they will reply here as soon as they can" in notice.text
    assert "shift" not in notice.text and "shortly" not in notice.text


async def test_staff_conversations_are_not_handed_over_by_default(
    chat: ChatService, handoffs: HandoffService
) -> None:
    request = TurnRequest("widget", "widget:alice:1", "staff", "alice", "talk to a human")
    reply = await chat.handle_turn(request)
    assert "person from our support team" not in reply.text and not await handoffs.queue()


@pytest.mark.parametrize(
    "text",
    [
        "How can I send money to a person abroad in another currency?",
        "Where is the report of what each staff member spent?",
        "Can I connect two employees to one vendor account?",
    ],
)
async def test_a_product_question_about_people_is_answered_not_handed_over(
    chat: ChatService, handoffs: HandoffService, model: CapturingChatModel, text: str
) -> None:
    calls_before = len(model.calls)
    await chat.handle_turn(said(text))

    assert len(model.calls) > calls_before  # the model answered
    assert not await handoffs.queue()


async def test_the_card_says_how_sure_the_decision_to_hand_over_was(
    settings: Settings, chat: ChatService, handoffs: HandoffService
) -> None:
    await chat.handle_turn(said("Could somebody from your support team take over here?"))

    (handoff,) = await handoffs.queue()
    card = HandoffCard.from_json(handoff.card)
    assert card.decided.startswith("read as a request for a person with probability ")
    needed = settings.decisions.person_confidence
    assert f"(needed {needed:.2f}; language en)" in card.decided
    assert f"Decided: {card.decided}" in card.as_text()


async def test_a_problem_report_ending_in_a_request_hands_over_and_the_card_says_why(
    chat: ChatService, handoffs: HandoffService, model: CapturingChatModel
) -> None:
    calls_before = len(model.calls)
    await chat.handle_turn(
        said(
            "После импорта выписки все суммы задвоились, я удалил лишнее вручную, но баланс не "
            "сходится. Хочу поговорить с живым человеком"
        )
    )

    assert len(model.calls) == calls_before  # no model: the decider was sure of the clause
    (handoff,) = await handoffs.queue()
    card = HandoffCard.from_json(handoff.card)
    assert card.decided.startswith("read as a question, one clause as a request for a person")
    assert "(needed 0.95; language ru)" in card.decided


async def test_a_long_report_handed_over_by_its_closing_sentences_says_so_on_the_card(
    chat: ChatService, handoffs: HandoffService, model: CapturingChatModel
) -> None:
    calls_before = len(model.calls)
    await chat.handle_turn(
        said(
            "The reconciliation for our savings account was fine until September, and now the "
            "starting balance in the reconcile window is 312.50 higher than the closing balance "
            "I reconciled last month. Nothing before September was edited as far as I know, and "
            "the bank statement clearly starts where the last one ended. I've checked the "
            "reconciled flags in the register and looked for transactions dated in the past. "
            "Could you forward this to one of your colleagues who knows reconciliation? I won't "
            "touch the file until then. Regards, Ian"
        )
    )

    assert len(model.calls) == calls_before  # no model: the closing sentences were enough
    (handoff,) = await handoffs.queue()
    card = HandoffCard.from_json(handoff.card)
    assert card.decided.startswith(
        "read as a question, its closing sentences as a request for a person with probability"
    )
    assert "(needed 0.90; language en)" in card.decided


async def test_a_client_handed_over_by_mistake_gets_the_bot_back(
    chat: ChatService, handoffs: HandoffService, model: CapturingChatModel
) -> None:
    await chat.handle_turn(said("I want to talk to a real person"))
    (handoff,) = await handoffs.queue()

    back = await chat.handle_turn(said("No no, I don't need a human, I just have a question"))

    assert back.text == "All right, no person then: I am answering your questions again."
    assert (back.outcome, back.handoff) == ("bot_back", None)
    assert not await handoffs.queue()
    closed = await handoffs.get(handoff.id)
    assert closed is not None and (closed.status, closed.resolved_by) == ("resolved", "client:Ann")
    calls_before = len(model.calls)
    answer = await chat.handle_turn(said("How do I create an invoice?"))
    assert len(model.calls) > calls_before and "Sales → Invoices → New invoice" in answer.text


async def test_a_claimed_handoff_stays_with_the_person_whatever_the_client_says(
    chat: ChatService, handoffs: HandoffService, model: CapturingChatModel
) -> None:
    await chat.handle_turn(said("I want to talk to a real person"))
    (handoff,) = await handoffs.queue()
    await handoffs.claim(handoff.id, "alice")
    calls_before = len(model.calls)

    quiet = await chat.handle_turn(said("No no, I don't need a human, I just have a question"))

    assert quiet.text == "" and len(model.calls) == calls_before
    assert (quiet.outcome, quiet.handoff) == ("quiet", "claimed")
    assert [h.status for h in await handoffs.queue()] == ["claimed"]
