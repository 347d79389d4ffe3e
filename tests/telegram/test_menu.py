"""The command menu is registered at start-up, in English by default, Russian and German."""

from tests.telegram.conftest import RunBot
from tests.telegram.fake_bot_api import FakeBotApi, chat, user


async def test_the_command_menu_is_registered_in_three_languages(
    bot_api: FakeBotApi, run_bot: RunBot
) -> None:
    async with run_bot():
        await bot_api.wait_for_calls(3, "setMyCommands")

    assert set(bot_api.commands) == {None, "ru", "de"}
    for commands in bot_api.commands.values():
        assert [c["command"] for c in commands] == ["ask", "reset", "forget", "help"]
    assert bot_api.commands[None][0]["description"] == "Ask a question"
    assert bot_api.commands["ru"][0]["description"] == "Задать вопрос"
    assert bot_api.commands["de"][0]["description"] == "Eine Frage stellen"


async def test_a_refused_menu_does_not_stop_the_bot(bot_api: FakeBotApi, run_bot: RunBot) -> None:
    bot_api.fail("setMyCommands", 3, 500)
    async with run_bot():
        await bot_api.wait_for_calls(3, "setMyCommands")
        bot_api.push(bot_api.message(chat(11), user(11, "Ann"), "How do I create an invoice?"))
        (answer,) = await bot_api.wait_for_messages(1)

    assert "Sales → Invoices → New invoice" in answer["text"]
    assert bot_api.commands == {}
