"""`supportbot telegram ...`: the bot with long polling."""

import asyncio
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from app.settings import Settings

app = typer.Typer(help="The Telegram bot.", no_args_is_help=True)


@app.command()
def run() -> None:
    """Answer Telegram chats with long polling (settings: SUPPORTBOT_TELEGRAM__*)."""
    from app.answers.service import AnswerService
    from app.observability.logs import configure_logging
    from app.runtime import Runtime
    from app.settings import get_settings
    from bot.application import ALLOWED_UPDATES, build_application

    settings = get_settings()
    if settings.telegram.token is None:
        raise typer.BadParameter("set SUPPORTBOT_TELEGRAM__TOKEN (from @BotFather)")
    if settings.telegram.mode == "webhook":
        # Polling would delete the webhook that the HTTP app registered.
        raise typer.BadParameter("mode is webhook: `supportbot serve` runs the bot")
    # Asked before polling: a token the Bot API rejects, or a Bot API that cannot be reached,
    # is one line (app/start_up_errors.py), not the polling loop's logged tracebacks.
    asyncio.run(_bot_api_answers(settings))
    configure_logging(settings)
    runtime = Runtime.from_settings(settings)

    async def start_runtime() -> None:
        await runtime.start()
        await runtime.engine.dispose()  # its connections belong to this loop, not the bot's

    asyncio.run(start_runtime())

    async def sweep(_: object) -> None:
        runtime.sweep_periodically()  # on the bot's event loop, which serves the turns

    async def close_runtime(_: object) -> None:
        await runtime.aclose()

    application = build_application(
        settings,
        runtime.chat,
        runtime.sessions,
        polling=True,
        answers=AnswerService.configured(runtime.sessions, runtime.knowledge, settings.knowledge),
        post_init=sweep,
        post_shutdown=close_runtime,
    )
    application.run_polling(allowed_updates=ALLOWED_UPDATES)


async def _bot_api_answers(settings: "Settings") -> None:
    """getMe with the configured token and Bot API."""
    from telegram import Bot

    assert settings.telegram.token is not None
    bot = Bot(
        settings.telegram.token.get_secret_value(),
        base_url=settings.telegram.api_base_url,
        base_file_url=settings.telegram.file_base_url,
    )
    async with bot:  # initialize: getMe
        pass
