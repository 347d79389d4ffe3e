"""`supportbot telegram ...`: the bot with long polling."""

import logging

import typer

from app.settings import get_settings

app = typer.Typer(help="The Telegram bot.", no_args_is_help=True)


@app.command()
def run() -> None:
    """Answer Telegram chats with long polling (settings: SUPPORTBOT_TELEGRAM__*)."""
    from app.observability.redact import configured_secrets, install_log_redaction
    from app.runtime import Runtime
    from bot.application import ALLOWED_UPDATES, build_application

    settings = get_settings()
    if settings.telegram.token is None:
        raise typer.BadParameter("set SUPPORTBOT_TELEGRAM__TOKEN (from @BotFather)")
    if settings.telegram.mode == "webhook":
        # Polling would delete the webhook that the HTTP app registered.
        raise typer.BadParameter("mode is webhook: `supportbot serve` runs the bot")
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level="INFO")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per getUpdates otherwise
    install_log_redaction(configured_secrets(settings))  # request URLs carry the bot token
    runtime = Runtime.from_settings(settings)

    async def close_runtime(_: object) -> None:
        await runtime.aclose()

    application = build_application(
        settings, runtime.chat, runtime.sessions, polling=True, post_shutdown=close_runtime
    )
    application.run_polling(allowed_updates=ALLOWED_UPDATES)
