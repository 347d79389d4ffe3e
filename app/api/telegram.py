"""Telegram in webhook mode: Telegram POSTs each update here; the bot (bot/) handles it
after the response, so a slow answer never makes Telegram retry."""

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from secrets import compare_digest
from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, FastAPI, Header, HTTPException, Request, Response, status

from app.runtime import Runtime

if TYPE_CHECKING:  # the Telegram library, slow to import, loads only when a bot runs
    from telegram import Bot, Update

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"

router = APIRouter(tags=["telegram"])


@asynccontextmanager
async def webhook_bot(app: FastAPI) -> AsyncIterator[None]:
    """Runs the bot for the app's lifetime when a token is set and the mode is webhook."""
    runtime: Runtime = app.state.runtime
    settings = runtime.settings.telegram
    app.state.telegram = None
    if settings.token is None or settings.mode != "webhook":
        yield
        return
    if settings.webhook_secret is None:
        raise RuntimeError("webhook mode needs SUPPORTBOT_TELEGRAM__WEBHOOK_SECRET")
    from app.answers.service import AnswerService
    from bot.application import ALLOWED_UPDATES, build_application

    answers = AnswerService.configured(
        runtime.sessions, runtime.knowledge, runtime.settings.knowledge
    )
    application = build_application(
        runtime.settings, runtime.chat, runtime.sessions, polling=False, answers=answers
    )
    async with application:
        if settings.webhook_url:
            await application.bot.set_webhook(
                settings.webhook_url,
                secret_token=settings.webhook_secret.get_secret_value(),
                allowed_updates=ALLOWED_UPDATES,
            )
        await application.start()
        app.state.telegram = application
        try:
            yield
        finally:
            await application.stop()


def telegram_update(body: bytes, bot: "Bot") -> "Update":
    """The update a webhook body holds, or 400: not JSON (nested too deep included), not an
    object, no integer `update_id`, or fields of the wrong shape."""
    from telegram import Update

    try:
        data = json.loads(body)
        if not isinstance(data, dict) or type(data.get("update_id")) is not int:
            raise ValueError("no integer update_id")
        return Update.de_json(data, bot)
    except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as error:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, "not a Telegram update") from error


@router.post("/telegram/webhook", include_in_schema=False)
async def telegram_webhook(
    request: Request, secret: Annotated[str | None, Header(alias=SECRET_HEADER)] = None
) -> Response:
    application = request.app.state.telegram
    if application is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "the Telegram bot is not in webhook mode")
    expected = request.app.state.runtime.settings.telegram.webhook_secret.get_secret_value()
    if secret is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, f"missing {SECRET_HEADER}")
    if not compare_digest(secret.encode(), expected.encode()):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"wrong {SECRET_HEADER}")
    update = telegram_update(await request.body(), application.bot)
    await application.update_queue.put(update)
    return Response(status_code=status.HTTP_200_OK)
