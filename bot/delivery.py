"""At-least-once delivery of answers to Telegram.

A turn's delivery is recorded `pending` as soon as the question is stored, before the
model answers. Sending retries network errors, 5xx and 429 (waiting as long as Telegram's
`retry_after` says) until the patience runs out; then the delivery is `failed`, logged and
counted, and the user gets an apology if anything gets through. A delivery still
`pending` when the bot stops (or is killed) is sent at the next start; the parts already
sent are skipped, so each part arrives once unless the process dies between Telegram
accepting it and the database recording it."""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot, ReplyParameters
from telegram import Message as TelegramMessage
from telegram._utils.types import ReplyMarkup
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError, TimedOut

from app.chat.types import Citation, citations_of
from app.db import queries
from app.db.models import Message, TelegramDelivery, Turn
from app.observability import metrics
from bot.render import Part

log = logging.getLogger(__name__)

FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 30.0


class Stopping(Exception):
    """The bot is stopping: the delivery stays pending for the next start."""


@dataclass(frozen=True)
class Destination:
    chat_id: int
    message_thread_id: int | None  # a forum topic
    reply_to_message_id: int

    @classmethod
    def of(cls, message: TelegramMessage) -> "Destination":
        thread = message.message_thread_id if message.is_topic_message else None
        return cls(message.chat_id, thread, message.message_id)

    @classmethod
    def of_row(cls, delivery: TelegramDelivery) -> "Destination":
        return cls(delivery.chat_id, delivery.message_thread_id, delivery.reply_to_message_id)


def _seconds(retry_after: int | timedelta) -> float:
    return retry_after.total_seconds() if isinstance(retry_after, timedelta) else retry_after


async def send_patiently(
    send: Callable[[], Awaitable[Any]],
    patience_seconds: float,
    stopping: asyncio.Event | None = None,
) -> None:
    """Call `send` until it succeeds: after a RetryAfter as long as Telegram says, after
    network errors, timeouts and 5xx with exponential backoff, never after a BadRequest
    (the message itself is refused). Re-raises the last failure when the next try would
    start after the patience, and TimedOut when a try itself (e.g. the rate limiter
    waiting out flood control) outlasts it; Stopping once `stopping` is set."""
    stopping = stopping or asyncio.Event()  # no stop signal: only the patience ends it
    loop = asyncio.get_running_loop()
    give_up_at = loop.time() + patience_seconds
    backoff = FIRST_BACKOFF_SECONDS
    while True:
        if stopping.is_set():
            raise Stopping
        try:
            async with asyncio.timeout_at(give_up_at):
                await send()
            return
        except TimeoutError as error:
            raise TimedOut(f"gave up after {patience_seconds:g} s") from error
        except RetryAfter as error:  # Telegram's flood control says how long to wait
            failure: TelegramError = error
            wait = _seconds(error.retry_after)
        except BadRequest:  # the message itself is refused: sending again cannot help
            raise
        except NetworkError as error:  # connection failures, timeouts, 5xx
            failure = error
            wait, backoff = backoff, min(2 * backoff, MAX_BACKOFF_SECONDS)
        if loop.time() + wait > give_up_at:
            raise failure
        log.warning("sending failed (%s); trying again in %.1f s", failure, wait)
        with suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), wait)


class Outbox:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        patience_seconds: float,
        *,
        count_failures: bool,
    ) -> None:
        self._sessions = sessions
        self._patience = patience_seconds
        self._count_failures = count_failures
        self.stopping = asyncio.Event()  # set when the bot stops: sending waits no longer

    async def expect(self, conversation_key: str, turn: int, destination: Destination) -> int:
        """Record that the answer of this (stored) turn is owed to `destination`; returns
        the delivery's id (the turn's)."""
        async with self._sessions() as session:
            found = await queries.find_turn(session, conversation_key, turn)
            if found is None:
                raise LookupError(f"no turn {turn} of {conversation_key}")
            turn_id = found[1].id
            session.add(
                TelegramDelivery(
                    turn_id=turn_id,
                    chat_id=destination.chat_id,
                    message_thread_id=destination.message_thread_id,
                    reply_to_message_id=destination.reply_to_message_id,
                )
            )
            await session.commit()
        return turn_id

    async def undelivered(self) -> list[tuple[TelegramDelivery, Turn]]:
        """Deliveries still pending whose turn has ended (a running turn's answer is still
        on its way through the process that runs it)."""
        async with self._sessions() as session:
            rows = await session.execute(
                select(TelegramDelivery, Turn)
                .join(Turn, Turn.id == TelegramDelivery.turn_id)
                .where(TelegramDelivery.state == "pending", Turn.status != "running")
                .order_by(TelegramDelivery.turn_id)
            )
            return [(delivery, turn) for delivery, turn in rows]

    async def stored_answer(self, turn: Turn) -> tuple[str, list[Citation]]:
        """An `ok` turn's answer and citations as the database keeps them."""
        async with self._sessions() as session:
            messages = (
                await session.scalars(
                    select(Message)
                    .where(Message.conversation_id == turn.conversation_id)
                    .where(Message.turn == turn.number)
                    .order_by(Message.seq)
                )
            ).all()
        answers = [m.content for m in messages if m.role == "assistant"]
        answer = answers[-1] if answers else ""
        passages = (p for m in messages if m.role == "tool" for p in m.artifact or [])
        return answer, citations_of(answer, passages)

    async def deliver(
        self,
        bot: Bot,
        turn_id: int,
        destination: Destination,
        parts: Sequence[Part],
        *,
        already_sent: int = 0,
        reply_markup: ReplyMarkup | None = None,
        apology: str | None = None,
    ) -> bool:
        """Send the parts not sent yet, in order (the first as a reply to the question,
        `reply_markup` under the last); True when all arrived. When Telegram refuses a
        part or the patience runs out the delivery is `failed` and `apology` is tried
        once; when the bot stops it stays `pending`."""
        for index in range(already_sent, len(parts)):
            last = index == len(parts) - 1
            send = partial(
                self._send_part,
                bot,
                destination,
                parts[index],
                first=index == 0,
                reply_markup=reply_markup if last else None,
            )
            try:
                await send_patiently(send, self._patience, self.stopping)
            except Stopping:
                log.info("stopping: the answer of turn %s is sent at the next start", turn_id)
                return False
            except TelegramError as error:
                await self._record(turn_id, state="failed")
                log.error("the answer of turn %s was not delivered: %s", turn_id, error)
                if self._count_failures:
                    metrics.count_undelivered()
                if apology is not None:
                    await self._apologize(bot, destination, apology)
                return False
            await self._record(turn_id, parts_sent=index + 1)
        await self._record(turn_id, state="sent")
        return True

    @staticmethod
    async def _send_part(
        bot: Bot,
        destination: Destination,
        part: Part,
        *,
        first: bool,
        reply_markup: ReplyMarkup | None = None,
    ) -> None:
        """One message; the first part replies to the question."""
        replying = ReplyParameters(
            destination.reply_to_message_id, allow_sending_without_reply=True
        )
        await bot.send_message(
            destination.chat_id,
            part.text,
            entities=part.entities or None,
            parse_mode=None,
            message_thread_id=destination.message_thread_id,
            reply_parameters=replying if first else None,
            reply_markup=reply_markup,
        )

    async def _apologize(self, bot: Bot, destination: Destination, text: str) -> None:
        try:
            await self._send_part(bot, destination, Part(text), first=True)
        except TelegramError as error:
            log.error("the apology was not delivered either: %s", error)

    async def _record(self, turn_id: int, **values: Any) -> None:
        async with self._sessions() as session:
            await session.execute(
                update(TelegramDelivery).where(TelegramDelivery.turn_id == turn_id).values(values)
            )
            await session.commit()
