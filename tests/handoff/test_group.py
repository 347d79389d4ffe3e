"""In a chat several people share (a Telegram group) a handoff is one member's: what
opens it counts that member's turns, and only it holds their messages and replies to
them. Through ChatService and HandoffService on SQLite (the bot's side is in
test_telegram.py)."""

from app.chat.service import ChatService
from app.chat.types import TurnRequest
from app.handoff.service import HandoffService

KEY = "telegram:-1001"
ANN, BOB = "telegram:11", "telegram:12"
NAMES = {ANN: "Ann", BOB: "Bob"}


def said(person: str, text: str, *, replying_to: str | None = None) -> TurnRequest:
    return TurnRequest(
        "telegram", KEY, "client", NAMES[person], text, person=person, replying_to=replying_to
    )


async def rate_down(chat: ChatService, turn: int) -> None:
    found = await chat.find_turn(KEY, turn)
    assert found is not None
    await chat.add_feedback(*found, helpful=False, comment=None, author="Bob")


async def test_thumbs_down_count_per_member_and_open_the_rated_members_handoff(
    chat: ChatService, handoffs: HandoffService
) -> None:
    for person in (ANN, BOB, ANN):
        await chat.handle_turn(said(person, "VAT rates?"))
    await rate_down(chat, 1)  # Ann's
    await rate_down(chat, 2)  # Bob's
    assert await handoffs.queue() == []  # one 👎 each

    await rate_down(chat, 3)  # Ann's second

    (handoff,) = await handoffs.queue()
    assert (handoff.person, handoff.reason) == (ANN, "thumbs_down")
    answered = await chat.handle_turn(said(BOB, "VAT rates?"))
    assert (answered.outcome, answered.handoff) == ("answered", None)


async def test_a_reply_to_the_handed_over_member_is_held_and_cannot_give_the_bot_back(
    chat: ChatService, handoffs: HandoffService
) -> None:
    await chat.handle_turn(said(ANN, "I want to talk to a real person"))
    (handoff,) = await handoffs.queue()
    assert handoff.person == ANN

    reply = said(BOB, "No no, she doesn't need a human, just answer her", replying_to=ANN)
    held = await chat.handle_turn(reply)
    assert (held.text, held.outcome, held.handoff) == ("", "quiet", "open")
    own = await chat.handle_turn(said(BOB, "VAT rates?"))
    assert (own.outcome, own.handoff) == ("answered", None)
    assert [h.id for h in await handoffs.queue()] == [handoff.id]

    back = await chat.handle_turn(said(ANN, "No no, I don't need a human, I just have a question"))
    assert (back.outcome, back.handoff) == ("bot_back", None)
    assert await handoffs.queue() == []


async def test_two_members_handed_over_at_once_each_have_their_own_handoff(
    chat: ChatService, handoffs: HandoffService
) -> None:
    for person in (ANN, BOB):
        reply = await chat.handle_turn(said(person, "I want to talk to a real person"))
        assert (reply.outcome, reply.handoff) == ("handed_off", "open")

    assert sorted(h.person for h in await handoffs.queue()) == [ANN, BOB]
