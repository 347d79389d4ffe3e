"""The command menu Telegram shows next to the message field, registered at start-up in
English (the default for every other language), Russian and German."""

import logging

from telegram import Bot, BotCommand
from telegram.error import TelegramError

log = logging.getLogger(__name__)

# language_code -> (command, description); None: users whose language has no menu of its own.
COMMANDS: dict[str | None, list[tuple[str, str]]] = {
    None: [
        ("ask", "Ask a question"),
        ("reset", "Start a fresh conversation (chat admins)"),
        ("forget", "Forget what I told the bot in this chat"),
        ("help", "How to talk to the bot"),
    ],
    "ru": [
        ("ask", "Задать вопрос"),
        ("reset", "Начать разговор заново (админы чата)"),
        ("forget", "Забыть, что я рассказал боту в этом чате"),
        ("help", "Как общаться с ботом"),
    ],
    "de": [
        ("ask", "Eine Frage stellen"),
        ("reset", "Das Gespräch neu beginnen (Chat-Admins)"),
        ("forget", "Vergessen, was ich dem Bot in diesem Chat gesagt habe"),
        ("help", "So sprechen Sie mit dem Bot"),
    ],
}


async def register_commands(bot: Bot) -> None:
    """setMyCommands for each language; a failure is logged, the bot answers anyway."""
    for language, commands in COMMANDS.items():
        try:
            await bot.set_my_commands(
                [BotCommand(name, description) for name, description in commands],
                language_code=language,
            )
        except TelegramError as error:
            log.warning("could not register the %s command menu: %s", language or "default", error)
