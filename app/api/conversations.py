"""Conversations over HTTP: post a message (whole or streamed), read the history, rate an
answer. Who may touch which conversation: app/api/auth.py."""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Path, Request, Response, status
from fastapi.sse import EventSourceResponse, ServerSentEvent

from app.api.auth import Caller, CallerDep, StaffFirst, get_caller, require_staff
from app.api.conversation_tokens import TOKEN_HEADER, check_started_by, start_or_check
from app.api.deps import ChatServiceDep, RuntimeDep, SettingsDep
from app.api.errors import documented
from app.api.markdown import answer_html
from app.api.rate_limits import Reservation, TurnLimits
from app.api.schemas import (
    CitationOut,
    ConversationOut,
    FeedbackIn,
    FeedbackOut,
    MessageIn,
    MessageOut,
    ProfileIn,
    ProfileOut,
    RatingOut,
    ReplyOut,
    UsageOut,
    UsageReportOut,
)
from app.chat.types import (
    TurnDone,
    TurnError,
    TurnEvent,
    TurnRequest,
    TurnToken,
    UnknownProfile,
    ask_command,
    citations_of,
)
from app.db.models import Conversation, Feedback, Message
from app.memory.scope import api_scope, widget_scope
from app.observability.usage import UsageTotals
from app.settings import CONVERSATION_KEY_PATTERN, KnowledgeSettings

T = TypeVar("T")

router = APIRouter(
    prefix="/v1/conversations", tags=["conversations"], dependencies=[Depends(get_caller)]
)
# What staff alone may do to a conversation.
staff_router = APIRouter(
    prefix="/v1/conversations",
    tags=["conversations"],
    dependencies=[Depends(require_staff)],
    route_class=StaffFirst,
)

ConversationKey = Annotated[
    str,
    Path(
        pattern=CONVERSATION_KEY_PATTERN,
        examples=["api:demo", "widget:alice:1"],
        description="letters, digits and `. _ : @ + -`, at most 128",
    ),
]
TurnNumber = Annotated[int, Path(ge=1, le=2**31 - 1)]  # the turns.number column's range


def memory_scope(caller: Caller, person: str | None) -> str | None:
    """Whose memory the turn reads and writes: a staff member's own, a backend's person
    under its key prefix; an anonymous client is not remembered."""
    if caller.is_staff and caller.name:
        return widget_scope(caller.name)
    if caller.kind == "backend" and person:
        return api_scope(caller.key_prefix, person)
    return None


@dataclass(frozen=True)
class Turn:
    """A checked turn and the tokens it holds of its caller's budget until it ends."""

    request: TurnRequest
    reservation: Reservation
    conversation_token: str | None  # when the turn starts a public caller's conversation


async def checked_turn(
    key: ConversationKey,
    body: MessageIn,
    caller: CallerDep,
    chat: ChatServiceDep,
    runtime: RuntimeDep,
    http: Request,
    response: Response,
) -> AsyncIterator[Turn]:
    """The turn, checked (and counted against the rate limits) before anything is stored
    or streamed; once the response has ended, what the turn reserved and did not settle
    (it failed, or its client left) is given back. A conversation a public caller starts
    is claimed last, so that a refused turn leaves its key free."""
    if refused := caller.may_write(key):
        raise HTTPException(status.HTTP_403_FORBIDDEN, refused)
    if body.audience == "staff" and not caller.is_staff:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "the staff audience needs staff credentials")
    ask, text = ask_command(body.text)
    request = TurnRequest(
        channel=caller.channel,
        conversation_key=key,
        audience=body.audience,
        author=caller.name if caller.is_staff else body.author,
        text=text,
        ask=ask,
        memory_scope=memory_scope(caller, body.person),
    )
    chat.validate(request)
    limits = turn_limits(http)
    reservation = await limits.take(key, caller.rate_key)
    try:
        token = await start_or_check(caller, key, http, runtime)
        if token:  # on the reply, and on a 502 that kept the message (app/api/main.py)
            response.headers[TOKEN_HEADER] = token
            http.state.conversation_token = token
        yield Turn(request, reservation, token)
    finally:
        await limits.release(reservation)


def turn_limits(http: Request) -> TurnLimits:
    limits: TurnLimits = http.app.state.turn_limits
    return limits


async def spent(http: Request, caller: Caller, turn: Turn, usage: UsageTotals) -> None:
    await turn_limits(http).settle(
        turn.reservation, caller.kind, usage.input_tokens + usage.output_tokens
    )


TurnDep = Annotated[Turn, Depends(checked_turn)]


@router.post(
    "/{key}/messages",
    response_model=ReplyOut,
    responses=documented(400, 401, 403, 413, 422, 429, 502),
)
async def post_message(
    turn: TurnDep,
    chat: ChatServiceDep,
    settings: SettingsDep,
    caller: CallerDep,
    http: Request,
) -> ReplyOut:
    """Run one turn and return the answer with its citations and token usage. A turn that
    fails answers 502; its detail says whether the message was kept."""
    reply = await chat.handle_turn(turn.request)
    await spent(http, caller, turn, reply.usage)
    return ReplyOut.of(reply, settings.knowledge, turn.conversation_token)


async def started_turn(turn: TurnDep, chat: ChatServiceDep) -> AsyncIterator[TurnEvent]:
    """The turn's events from the first on: a refusal (the conversation's audience, say)
    is raised here, before the response starts, and answered 4xx."""
    events = chat.stream_turn(turn.request)
    first = await anext(events)

    async def from_first() -> AsyncIterator[TurnEvent]:
        yield first
        async for event in events:
            yield event

    return from_first()


@router.post(
    "/{key}/messages/stream",
    response_class=EventSourceResponse,
    responses=documented(400, 401, 403, 413, 422, 429, streaming=True),
)
async def stream_message(
    events: Annotated[AsyncIterator[TurnEvent], Depends(started_turn)],
    turn: TurnDep,
    settings: SettingsDep,
    caller: CallerDep,
    http: Request,
) -> AsyncIterator[ServerSentEvent]:
    """The same turn as Server-Sent Events: `token` events ({"text"}) as the model writes,
    then one `done` event with the whole reply (as the non-streaming endpoint returns it),
    or one `error` event ({"detail", "message_kept"}) when the turn failed."""
    async for event in events:
        if isinstance(event, TurnToken):
            yield ServerSentEvent(event="token", data={"text": event.text})
        elif isinstance(event, TurnDone):
            await spent(http, caller, turn, event.reply.usage)
            reply = ReplyOut.of(event.reply, settings.knowledge, turn.conversation_token)
            yield ServerSentEvent(event="done", data=reply.model_dump())
        elif isinstance(event, TurnError):
            data = {"detail": event.detail, "message_kept": event.message_kept}
            yield ServerSentEvent(event="error", data=data)


def readable(
    key: str, caller: Caller, found: tuple[Conversation, T] | None
) -> tuple[Conversation, T]:
    """What was found for `key`, if there is something and this caller may read it."""
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no conversation {key!r}")
    if found[0].audience == "staff" and not caller.is_staff:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "staff credentials required")
    return found


async def readable_key(
    key: ConversationKey, caller: CallerDep, runtime: RuntimeDep, http: Request
) -> str:
    """The path's key, refused before the conversation is looked up when the caller may
    not read it (so a refusal says nothing about whether the conversation exists)."""
    if refused := caller.may_read(key):
        raise HTTPException(status.HTTP_403_FORBIDDEN, refused)
    await check_started_by(caller, key, http, runtime)
    return key


ReadableKey = Annotated[str, Depends(readable_key)]


@router.post(
    "/{key}/turns/{turn}/feedback",
    status_code=status.HTTP_201_CREATED,
    responses=documented(400, 401, 403, 404, 413, 422),
)
async def post_feedback(
    key: ReadableKey,
    turn: TurnNumber,
    body: FeedbackIn,
    chat: ChatServiceDep,
    caller: CallerDep,
) -> FeedbackOut:
    """Rate one answer (👍/👎 with an optional comment)."""
    conversation, found = readable(key, caller, await chat.find_turn(key, turn))
    await chat.add_feedback(
        conversation, found, body.rating == "up", body.comment, caller.name or body.author
    )
    return FeedbackOut(stored=True)


@router.get(
    "/{key}/usage",
    response_model=UsageReportOut,
    responses=documented(401, 403, 404, 422),
)
async def get_usage(key: ReadableKey, chat: ChatServiceDep, caller: CallerDep) -> UsageReportOut:
    """Tokens, cached share and cost of the conversation's LLM calls, by purpose."""
    _, by_purpose = readable(key, caller, await chat.usage(key))
    return UsageReportOut(
        conversation_key=key,
        by_purpose={purpose: UsageOut.of(totals) for purpose, totals in by_purpose.items()},
    )


@staff_router.put("/{key}/profile", responses=documented(400, 401, 403, 404, 413, 422))
async def put_profile(key: ConversationKey, body: ProfileIn, chat: ChatServiceDep) -> ProfileOut:
    """Staff only: give one conversation another memory profile than its audience's, from
    its next turn on (what earlier profiles cleared or folded stays so)."""
    try:
        found = await chat.set_profile(key, body.profile)
    except UnknownProfile as unknown:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(unknown)) from None
    if not found:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no conversation {key!r}")
    return ProfileOut(key=key, profile=body.profile)


def is_said(message: Message) -> bool:
    """A message someone said in the chat (the client, the bot's answer, the support team),
    not the model's work: its tool calls and their results."""
    return message.role in ("user", "staff") or (
        message.role == "assistant" and not message.tool_calls
    )


def shown_messages(
    messages: list[Message],
    feedback: dict[int, Feedback],
    knowledge: KnowledgeSettings,
    memory_blocks: dict[int, str] | None,
) -> list[MessageOut]:
    """The stored messages, each final answer as HTML too, with the citations its turn
    produced and its latest rating; with `memory_blocks` (staff), every message, each
    turn's user message with the memory block the turn sent the model; without (a client),
    only what was said."""
    said = messages if memory_blocks is not None else [m for m in messages if is_said(m)]
    shown = [MessageOut.model_validate(m) for m in said]
    for out, message in zip(shown, said, strict=True):
        if message.role == "user" and memory_blocks is not None:
            out.memory_block = memory_blocks.get(message.turn)
        if message.role == "assistant" and not message.tool_calls:
            passages = (
                p for m in messages if m.turn == message.turn and m.artifact for p in m.artifact
            )
            out.citations = [
                CitationOut.of(c, knowledge) for c in citations_of(message.content, passages)
            ]
            out.html = answer_html(message.content)
            if rated := feedback.get(message.turn):
                out.feedback = RatingOut.of(rated)
    return shown


@router.get(
    "/{key}",
    response_model=ConversationOut,
    responses=documented(401, 403, 404, 422),
)
async def get_conversation(
    key: ReadableKey, chat: ChatServiceDep, caller: CallerDep, settings: SettingsDep
) -> ConversationOut:
    """The transcript, each answer with its citations and its latest rating. Staff get all
    of it: tool calls and their results, what memory took out of the context, each turn's
    message with the memory block the turn sent the model. Anyone else (an API key, an
    anonymous caller) gets what was said: the client's messages, the answers and the
    support team's replies."""
    conversation, messages = readable(key, caller, await chat.history(key))
    feedback = await chat.feedback(conversation)
    blocks = await chat.memory_blocks(conversation) if caller.is_staff else None
    return ConversationOut(
        key=conversation.key,
        channel=conversation.channel,
        audience=conversation.audience,
        profile=conversation.profile,
        messages=shown_messages(messages, feedback, settings.knowledge, blocks),
    )
