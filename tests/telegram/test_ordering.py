"""One chat's updates run one at a time and in order; other chats do not wait for them."""

import asyncio

from telegram import Chat, Message, Update

from bot.application import ChatOrderedUpdateProcessor


def update(update_id: int, chat_id: int) -> Update:
    chat = Chat(chat_id, Chat.SUPERGROUP)
    return Update(update_id, message=Message(update_id, None, chat))  # type: ignore[arg-type]


async def test_updates_of_one_chat_run_in_order_and_other_chats_run_meanwhile() -> None:
    processor = ChatOrderedUpdateProcessor(max_concurrent_updates=8)
    log: list[str] = []
    slow_started = asyncio.Event()
    release_slow = asyncio.Event()

    async def handle(name: str, slow: bool = False) -> None:
        log.append(f"start {name}")
        if slow:
            slow_started.set()
            await release_slow.wait()
        log.append(f"end {name}")

    tasks = [
        asyncio.create_task(processor.process_update(update(1, -1), handle("a1", slow=True))),
        asyncio.create_task(processor.process_update(update(2, -1), handle("a2"))),
        asyncio.create_task(processor.process_update(update(3, -2), handle("b1"))),
        asyncio.create_task(processor.process_update(update(4, -1), handle("a3"))),
    ]
    await slow_started.wait()
    await asyncio.sleep(0.05)
    assert log == ["start a1", "start b1", "end b1"]  # chat -2 did not wait for chat -1
    release_slow.set()
    await asyncio.gather(*tasks)
    assert log[3:] == ["end a1", "start a2", "end a2", "start a3", "end a3"]
