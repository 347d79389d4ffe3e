"""The python-telegram-bot Application: handlers, flood limits, per-chat ordering."""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any
from weakref import WeakValueDictionary

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import LinkPreviewOptions, Update
from telegram.constants import ParseMode
from telegram.ext import (
    AIORateLimiter,
    Application,
    BaseHandler,
    BaseUpdateProcessor,
    CallbackQueryHandler,
    CommandHandler,
    Defaults,
    MessageHandler,
    TypeHandler,
    filters,
)

from app.answers.service import AnswerService
from app.chat.service import ChatService
from app.settings import Settings
from bot.handlers import SupportBot
from bot.handoff import CLAIM_PATTERN, HandoffHandlers, TelegramMessenger
from bot.save_answer import SaveAnswer
from bot.updates import ADDRESSED_TO_BOT

log = logging.getLogger(__name__)


class BotApplication(Application[Any, Any, Any, Any, Any, Any]):
    """The Application with the bot's own start and stop, whoever runs it (long polling,
    the webhook route, tests): at start the bot catches up on undelivered answers. At stop
    (the updater, if any, has stopped fetching updates) the updates already taken finish
    and deliver their answers within `shutdown_grace_seconds`; past it they are cancelled
    and sending stops waiting, leaving those answers for the next start."""

    def __init__(self, *, support: SupportBot, grace_seconds: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.support = support
        self.grace_seconds = grace_seconds

    async def start(self) -> None:
        await super().start()
        await self.support.start_up(self)

    async def stop(self) -> None:
        give_up = asyncio.get_running_loop().call_later(self.grace_seconds, self._give_up)
        try:
            await super().stop()
        finally:
            give_up.cancel()
            self.support.outbox.stopping.set()

    def _give_up(self) -> None:
        processor = self.update_processor
        running = (
            processor.cancel_running() if isinstance(processor, ChatOrderedUpdateProcessor) else 0
        )
        log.warning(
            "stopping: %d updates still running after %.0f s are answered after the next start",
            running,
            self.grace_seconds,
        )
        self.support.outbox.stopping.set()


# New messages only (an edited message is never answered a second time), and clicks on
# the rating buttons and on a handoff card's Claim button.
ALLOWED_UPDATES = [Update.MESSAGE, Update.CALLBACK_QUERY]


class ChatOrderedUpdateProcessor(BaseUpdateProcessor):
    """Updates of different chats run concurrently, those of one chat one at a time and in
    the order they arrived (asyncio locks queue their waiters first come, first served)."""

    def __init__(self, max_concurrent_updates: int) -> None:
        super().__init__(max_concurrent_updates)
        self._chat_locks: WeakValueDictionary[int, asyncio.Lock] = WeakValueDictionary()
        self._running: set[asyncio.Task[Any]] = set()

    def cancel_running(self) -> int:
        """Cancel the updates being processed (at stop, past the grace period)."""
        for task in self._running:
            task.cancel()
        return len(self._running)

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        task = asyncio.current_task()
        assert task is not None  # the Application processes each update in a task of its own
        self._running.add(task)
        try:
            await self._in_chat_order(update, coroutine)
        finally:
            self._running.discard(task)

    async def _in_chat_order(self, update: object, coroutine: Awaitable[Any]) -> None:
        chat = update.effective_chat if isinstance(update, Update) else None
        # A click is answered at once, not after the chat's running turn: Telegram shows a
        # spinner until then, and gives up on the query after a few seconds.
        if chat is None or (isinstance(update, Update) and update.callback_query is not None):
            await coroutine
            return
        lock = self._chat_locks.setdefault(chat.id, asyncio.Lock())
        async with lock:
            await coroutine

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to release."""


# Run once the application has started (post_init) or stopped (post_shutdown).
Hook = Callable[[Application[Any, Any, Any, Any, Any, Any]], Coroutine[Any, Any, None]]


def build_application(
    settings: Settings,
    chat: ChatService,
    sessions: async_sessionmaker[AsyncSession],
    *,
    polling: bool,
    answers: AnswerService | None = None,
    post_init: Hook | None = None,
    post_shutdown: Hook | None = None,
) -> BotApplication:
    """The bot, fed by long polling or (`polling=False`) by whoever puts updates on its
    update queue: the webhook route. With `answers`, staff save team answers with `/save`."""
    telegram = settings.telegram
    if telegram.token is None:
        raise ValueError("no Telegram bot token: set SUPPORTBOT_TELEGRAM__TOKEN")
    bot = SupportBot(settings, chat, sessions)
    builder = (
        Application.builder()
        .token(telegram.token.get_secret_value())
        .base_url(telegram.api_base_url)
        .base_file_url(telegram.file_base_url)
        .defaults(
            Defaults(
                parse_mode=ParseMode.HTML,
                link_preview_options=LinkPreviewOptions(is_disabled=True),
                allow_sending_without_reply=True,  # the question may be deleted meanwhile
            )
        )
        .rate_limiter(
            AIORateLimiter(
                overall_max_rate=telegram.messages_per_second,
                overall_time_period=1,
                group_max_rate=telegram.group_messages_per_minute,
                group_time_period=60,
                max_retries=telegram.flood_retries,
            )
        )
        .concurrent_updates(ChatOrderedUpdateProcessor(telegram.concurrent_chats))
        .application_class(
            BotApplication,
            kwargs={"support": bot, "grace_seconds": telegram.shutdown_grace_seconds},
        )
    )
    if not polling:
        builder = builder.updater(None)
    if post_init is not None:
        builder = builder.post_init(post_init)
    if post_shutdown is not None:
        builder = builder.post_shutdown(post_shutdown)
    application = builder.build()
    assert isinstance(application, BotApplication)

    new_message = filters.UpdateType.MESSAGE
    readable = filters.TEXT | filters.PHOTO | filters.Document.ALL
    said = new_message & readable & ~filters.COMMAND
    application.add_handler(TypeHandler(Update, bot.skip_duplicates), group=-1)
    handlers: list[BaseHandler[Any, Any, Any]] = [
        CommandHandler("ask", bot.ask, filters=new_message),
        CommandHandler("reset", bot.reset, filters=new_message),
        CommandHandler("forget", bot.forget, filters=new_message),
        CommandHandler(["start", "help"], bot.help, filters=new_message),
        MessageHandler(said & ADDRESSED_TO_BOT, bot.answer),
    ]
    if answers is not None:
        handlers.append(
            CommandHandler("save", SaveAnswer(settings, sessions, answers).save, new_message)
        )
    if chat.handoffs is not None:  # a person may take chats over (app/handoff)
        chat.handoffs.messenger = TelegramMessenger(application.bot, settings, sessions)
        handoff = HandoffHandlers(settings, chat, chat.handoffs, sessions, bot.outbox)
        # Before the de-duplication (group -1) and the usual handlers: it de-duplicates
        # the messages it keeps from them itself.
        held = new_message & (filters.TEXT | filters.PHOTO) & ~filters.COMMAND
        application.add_handler(MessageHandler(held, handoff.hold_for_staff), group=-2)
        handlers.append(CallbackQueryHandler(handoff.claim, pattern=CLAIM_PATTERN))
    # Last: any other click is a rating (or answered as a stale one).
    handlers.append(CallbackQueryHandler(bot.rate))
    application.add_handlers(handlers)
    if telegram.group_context == "all":
        application.add_handler(MessageHandler(said & ~ADDRESSED_TO_BOT, bot.keep_as_context))
    application.add_error_handler(bot.on_error)
    return application
