"""`supportbot telegram ...`: the bot with long polling."""

import asyncio
import logging

import typer

app = typer.Typer(help="The Telegram bot.", no_args_is_help=True)
log = logging.getLogger(__name__)


@app.command()
def run() -> None:
    """Answer Telegram chats with long polling (settings: SUPPORTBOT_TELEGRAM__*)."""
    from telegram.error import InvalidToken

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
        post_init=sweep,
        post_shutdown=close_runtime,
    )
    try:
        application.run_polling(allowed_updates=ALLOWED_UPDATES)
    except InvalidToken:  # its message quotes the token
        log.error("Telegram rejected the bot token: check SUPPORTBOT_TELEGRAM__TOKEN")
        raise typer.Exit(1) from None
