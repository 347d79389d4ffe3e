"""Update de-duplication is per bot, and a claim too old to be a redelivery does not hold
back a new update that happens to have its id (Telegram numbers afresh after a quiet week)."""

from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import ProcessedUpdate
from tests.telegram.conftest import RunBot
from tests.telegram.fake_bot_api import BOT_USER, FakeBotApi, chat, user

ANN = user(11, "Ann")
OTHER_BOT = 987654


async def test_another_bots_claim_or_an_old_claim_never_drops_a_new_message(
    bot_api: FakeBotApi, run_bot: RunBot, sessions: async_sessionmaker[AsyncSession]
) -> None:
    now = datetime.now(UTC)
    async with sessions() as session:
        session.add_all(
            [
                # update 1 of this bot, three days ago: before Telegram numbered afresh
                ProcessedUpdate(
                    bot_id=BOT_USER["id"], update_id=1, processed_at=now - timedelta(days=3)
                ),
                # update 2 of another bot sharing the database, just now
                ProcessedUpdate(bot_id=OTHER_BOT, update_id=2, processed_at=now),
                # update 3 of this bot, an hour ago: a redelivery
                ProcessedUpdate(
                    bot_id=BOT_USER["id"], update_id=3, processed_at=now - timedelta(hours=1)
                ),
            ]
        )
        await session.commit()
    private = chat(11)
    questions = [
        bot_api.push(bot_api.message(private, ANN, text))["message"]
        for text in ("How do I create an invoice?", "How do I record a payment?", "Thanks!")
    ]
    async with run_bot():
        bot_api.push(bot_api.message(private, ANN, "Where do I set the VAT rates?"))
        await bot_api.wait_for_messages(3)

    assert [len(bot_api.replies_to(m)) for m in questions] == [1, 1, 0]
    assert len(bot_api.delivered) == 3
    async with sessions() as session:
        claims = {(c.bot_id, c.update_id) for c in await session.scalars(select(ProcessedUpdate))}
    assert claims == {(BOT_USER["id"], n) for n in (1, 2, 3, 4)} | {(OTHER_BOT, 2)}
