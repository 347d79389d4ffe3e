"""A Telegram user's memory: kept within one chat across a /reset, shown to the model
after the system prompt, and gone after /forget."""

from app.settings import Settings
from bot.handlers import FORGOTTEN, NOTHING_TO_FORGET
from tests.fakes import CapturingChatModel
from tests.people_memory.test_block import block_of
from tests.telegram.conftest import RunBot
from tests.telegram.fake_bot_api import FakeBotApi, chat, user

GROUP, OTHER_GROUP = chat(-1001), chat(-1002)
ANN, BOB = user(11, "Ann", "Lee"), user(12, "Bob")


def system_blocks(model: CapturingChatModel) -> list[str]:
    content = model.calls[-2].messages[0].content  # the turn's first call: it searches
    return [content] if isinstance(content, str) else [b["text"] for b in content]  # type: ignore[index]


async def test_remembered_in_the_chat_after_a_reset_and_forgotten_on_request(
    bot_api: FakeBotApi, run_bot: RunBot, model: CapturingChatModel, settings: Settings
) -> None:
    bot_api.chat_members[(GROUP["id"], ANN["id"])] = "creator"
    async with run_bot():
        bot_api.push(bot_api.message(GROUP, ANN, "/ask Remember that our currency is CHF"))
        bot_api.push(bot_api.message(GROUP, ANN, "/reset"))
        await bot_api.wait_for_messages(2)
        bot_api.push(bot_api.message(GROUP, ANN, "/ask How do I create an invoice?"))
        await bot_api.wait_for_messages(3)
        ann_after_reset = system_blocks(model)
        bot_api.push(bot_api.message(OTHER_GROUP, ANN, "/ask How do I create an invoice?"))
        await bot_api.wait_for_messages(4)
        ann_elsewhere = system_blocks(model)
        bot_api.push(bot_api.message(GROUP, BOB, "/forget"))
        bot_api.push(bot_api.message(GROUP, ANN, "/forget"))
        await bot_api.wait_for_messages(6)
        bot_api.push(bot_api.message(GROUP, ANN, "/reset"))
        await bot_api.wait_for_messages(7)
        bot_api.push(bot_api.message(GROUP, ANN, "/ask How do I create an invoice?"))
        await bot_api.wait_for_messages(8)

    assert ann_after_reset == [settings.chat.system_prompt, block_of("our currency is CHF")]
    assert ann_elsewhere == [settings.chat.system_prompt]
    assert [m["text"] for m in bot_api.sent()[4:6]] == [NOTHING_TO_FORGET, FORGOTTEN]
    assert system_blocks(model) == [settings.chat.system_prompt]
