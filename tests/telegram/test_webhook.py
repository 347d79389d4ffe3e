"""Webhook mode: the HTTP app registers the webhook, checks Telegram's secret header and
feeds the bot, here over the real runtime (sample knowledge base, offline model)."""

import json
from pathlib import Path

import httpx
from fastapi.testclient import TestClient
from pydantic import SecretStr

from app.api.main import create_app
from app.db import migrate
from app.settings import Settings
from tests.telegram.fake_bot_api import FakeBotApi, Json, chat, user

WEBHOOK = "/telegram/webhook"
SECRET = "s3cret-Token_1"


async def test_the_webhook_checks_the_secret_and_answers_each_update_once(
    bot_api: FakeBotApi, bot_settings: Settings, sample_index: Path
) -> None:
    bot_settings.knowledge.qdrant_path = sample_index
    bot_settings.telegram.mode = "webhook"
    bot_settings.telegram.webhook_url = "https://bot.example.com/telegram/webhook"
    bot_settings.telegram.webhook_secret = SecretStr(SECRET)
    migrate.upgrade(bot_settings.db.url, "heads")
    ann = user(11, "Ann")
    question: Json = {
        "update_id": 1,
        "message": bot_api.message(chat(11), ann, "How do I create an invoice?"),
    }
    app = create_app(bot_settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://test") as client,
    ):
        assert (await client.post(WEBHOOK, json=question)).status_code == 401
        wrong = {"X-Telegram-Bot-Api-Secret-Token": "guess"}
        assert (await client.post(WEBHOOK, json=question, headers=wrong)).status_code == 403
        right = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        assert (await client.post(WEBHOOK, content="{oops", headers=right)).status_code == 400
        for _ in range(2):  # Telegram retries when it thinks the first delivery failed
            assert (await client.post(WEBHOOK, json=question, headers=right)).status_code == 200
        await bot_api.wait_for_messages(1)
        next_question: Json = {"update_id": 2, "message": bot_api.message(chat(11), ann, "Thanks!")}
        assert (await client.post(WEBHOOK, json=next_question, headers=right)).status_code == 200
        await bot_api.wait_for_messages(2)

    assert bot_api.sent("setWebhook") == [
        {
            "url": "https://bot.example.com/telegram/webhook",
            "secret_token": SECRET,
            "allowed_updates": ["message", "callback_query"],
        }
    ]
    first, second = bot_api.sent()
    assert "Sales → Invoices → New invoice" in first["text"]
    assert first["reply_parameters"]["message_id"] == question["message"]["message_id"]
    assert second["reply_parameters"]["message_id"] == next_question["message"]["message_id"]


def test_without_webhook_mode_the_route_is_not_there(client: TestClient) -> None:
    response = client.post(WEBHOOK, json={}, headers={"X-Telegram-Bot-Api-Secret-Token": "x"})
    assert response.status_code == 404


async def test_a_body_that_is_no_update_is_a_400_and_reaches_no_one(
    bot_api: FakeBotApi, bot_settings: Settings, sample_index: Path
) -> None:
    bot_settings.knowledge.qdrant_path = sample_index
    bot_settings.telegram.mode = "webhook"
    bot_settings.telegram.webhook_secret = SecretStr(SECRET)
    migrate.upgrade(bot_settings.db.url, "heads")
    ann = user(11, "Ann")
    message = bot_api.message(chat(11), ann, "How do I create an invoice?")
    app = create_app(bot_settings)
    transport = httpx.ASGITransport(app=app)
    right = {"X-Telegram-Bot-Api-Secret-Token": SECRET, "content-type": "application/json"}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://test") as client,
    ):
        for body in [
            "[" * 100_000 + "]" * 100_000,  # deeper than the JSON parser goes
            json.dumps({"update_id": "x", "message": message}),
            json.dumps({"update_id": True, "message": message}),
            json.dumps({"message": message}),
            json.dumps([{"update_id": 3, "message": message}]),
            json.dumps({"update_id": 4, "message": "hello"}),
            "\xff",
        ]:
            refused = await client.post(WEBHOOK, content=body, headers=right)
            assert (refused.status_code, refused.json()) == (
                400,
                {"detail": "not a Telegram update"},
            )
        valid = {"update_id": 5, "message": message}
        assert (await client.post(WEBHOOK, json=valid, headers=right)).status_code == 200
        await bot_api.wait_for_messages(1)
    assert len(bot_api.sent()) == 1  # the valid update's answer alone
