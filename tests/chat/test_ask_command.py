"""`/ask` written at the start of a message over HTTP: the turn is addressed to the bot
and what it asks is the rest, as Telegram's own command handler gives it."""

from app.chat.types import ask_command


def test_the_command_is_taken_off_what_the_message_asks() -> None:
    assert ask_command("/ask where do I set the VAT rates?") == (
        True,
        "where do I set the VAT rates?",
    )
    assert ask_command("  /ask@ShopBot how do I\nsend an invoice?") == (
        True,
        "how do I\nsend an invoice?",
    )


def test_a_message_that_only_looks_like_it_is_not_addressed() -> None:
    for text in ("/asking for a friend: is it free?", "please /ask the team", "ask me"):
        assert ask_command(text) == (False, text)


def test_the_command_alone_stays_as_written() -> None:
    assert ask_command("/ask") == (True, "/ask")
    assert ask_command("/ask   ") == (True, "/ask   ")
