"""Handoffs over HTTP, for the staff widget's queue (app/widget/queue.html): list, read,
claim, reply (the card's drafted reply too), dismiss the draft, resolve. Staff credentials
only: a client (an API key, an anonymous caller) gets 403, and a staff member's own widget
chat stays theirs: a handoff over it is neither listed for nor open to another staff member
(403). The flow itself: app/handoff/service.py."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Query, Request, status
from pydantic import BaseModel, Field, field_validator

from app.api.auth import Caller, CallerDep, guarded_first, request_caller
from app.api.deps import ChatServiceDep, SettingsDep
from app.api.errors import documented
from app.api.schemas import CitationOut, ErrorOut, MessageOut, Text, UtcDatetime
from app.db.models import Handoff
from app.handoff.card import HandoffCard
from app.handoff.draft import Draft
from app.handoff.service import HandoffService, Undelivered
from app.handoff.store import ACTIVE, HandoffConflict
from app.runtime import Runtime
from app.settings import KnowledgeSettings


def staff_only(caller: CallerDep) -> Caller:
    if not caller.is_staff:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "handoffs need staff credentials")
    return caller


async def staff_only_request(request: Request) -> Caller:
    return staff_only(await request_caller(request))


def handoff_service(chat: ChatServiceDep) -> HandoffService:
    if chat.handoffs is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "handoffs are not set up")
    return chat.handoffs


StaffOnly = Annotated[Caller, Depends(staff_only)]
Handoffs = Annotated[HandoffService, Depends(handoff_service)]
HandoffId = Annotated[int, Path(ge=1, le=2**31 - 1)]

router = APIRouter(
    prefix="/v1/handoffs",
    tags=["handoffs"],
    dependencies=[Depends(staff_only)],
    route_class=guarded_first(staff_only_request),
)

CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorOut, "description": "claimed by another staff member, or resolved"}
}
UNDELIVERED: dict[int | str, dict[str, Any]] = {
    502: {"model": ErrorOut, "description": "stored, but the client's chat did not take it"}
}


class ExchangeOut(BaseModel):
    asked: str
    answered: str


class CardOut(BaseModel):
    conversation_key: str
    channel: str
    reason: str = Field(description="asked, model (request_human), not_found or thumbs_down")
    requested_by: str | None
    who: list[str] = Field(description="the people in the chat")
    goal: str
    constraints: list[str] = Field(description="facts and constraints the users stated")
    exchanges: list[ExchangeOut] = Field(description="what was asked and answered, last first")
    pages: list[str] = Field(description="pages the answers cited")
    open_question: str
    transcript_url: str
    topics: list[str]


class DraftOut(BaseModel):
    status: Literal["drafting", "drafted", "none", "dismissed", "sent"] = Field(
        description="drafting: not made yet; drafted: a reply to edit and send, or dismiss; "
        "none: no draft (see `reason`); dismissed or sent: settled by staff"
    )
    text: str = Field(description="the drafted reply (Markdown); never sent unless staff send it")
    citations: list[CitationOut] = Field(description="the passages the draft is drawn from")
    reason: str = Field(description='why there is no draft, e.g. "nothing relevant found"')

    @classmethod
    def of(cls, stored: dict[str, Any] | None, knowledge: KnowledgeSettings) -> "DraftOut":
        if stored is None:
            return cls(status="drafting", text="", citations=[], reason="")
        draft = Draft.from_json(stored)
        return cls(
            status=draft.status,
            text=draft.text,
            citations=[CitationOut.of(c, knowledge) for c in draft.citations],
            reason=draft.reason,
        )


class HandoffOut(BaseModel):
    id: int
    status: Literal["open", "claimed", "resolved"]
    reason: str
    requested_by: str | None
    opened_at: UtcDatetime
    claimed_by: str | None
    claimed_at: UtcDatetime | None
    resolved_by: str | None
    resolved_at: UtcDatetime | None
    card: CardOut
    draft: DraftOut = Field(description="the bot's drafted reply to the open question")

    @classmethod
    def of(cls, handoff: Handoff, knowledge: KnowledgeSettings) -> "HandoffOut":
        card = CardOut.model_validate(HandoffCard.from_json(handoff.card), from_attributes=True)
        return cls(
            id=handoff.id,
            status=handoff.status,
            reason=handoff.reason,
            requested_by=handoff.requested_by,
            opened_at=handoff.opened_at,
            claimed_by=handoff.claimed_by,
            claimed_at=handoff.claimed_at,
            resolved_by=handoff.resolved_by,
            resolved_at=handoff.resolved_at,
            card=card,
            draft=DraftOut.of(handoff.draft, knowledge),
        )


class StaffReplyIn(BaseModel):
    text: Text = Field(
        min_length=1,
        max_length=8192,
        description="sent under your name; longer than one Telegram message, it goes as several",
    )
    from_draft: bool = Field(
        False, description="the text is the card's draft (maybe edited): the draft is `sent`"
    )

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the reply is empty")
        return value.strip()


def found(handoff: Handoff | None, handoff_id: int) -> Handoff:
    if handoff is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no handoff {handoff_id}")
    return handoff


def _conversation_key(handoff: Handoff) -> str:
    return HandoffCard.from_json(handoff.card).conversation_key


async def reachable(handoff_id: HandoffId, handoffs: Handoffs, caller: StaffOnly) -> int:
    """The handoff's id, when this staff member may see and act on it: not one over
    another staff member's own widget chat (they alone read and write it), which no claim
    hands over."""
    handoff = found(await handoffs.get(handoff_id), handoff_id)
    if refused := caller.may_read(_conversation_key(handoff)):
        raise HTTPException(status.HTTP_403_FORBIDDEN, refused)
    return handoff_id


ReachableId = Annotated[int, Depends(reachable)]


@router.get("", responses=documented(401, 403, 422, 503))
async def list_handoffs(
    handoffs: Handoffs,
    caller: StaffOnly,
    settings: SettingsDep,
    state: Annotated[
        Literal["active", "open", "claimed", "resolved"],
        Query(alias="status", description="active: open and claimed"),
    ] = "active",
) -> list[HandoffOut]:
    """The queue, oldest first; without the handoffs over other staff members' own widget
    chats."""
    statuses = ACTIVE if state == "active" else (state,)
    queue = await handoffs.queue(statuses)
    knowledge = settings.knowledge
    return [HandoffOut.of(h, knowledge) for h in queue if not caller.may_read(_conversation_key(h))]


@router.get("/{handoff_id}", responses=documented(401, 403, 404, 422, 503))
async def get_handoff(
    handoff_id: ReachableId, handoffs: Handoffs, settings: SettingsDep
) -> HandoffOut:
    return HandoffOut.of(found(await handoffs.get(handoff_id), handoff_id), settings.knowledge)


@router.post("/{handoff_id}/claim", responses=documented(401, 403, 404, 422, 503) | CONFLICT)
async def claim_handoff(
    handoff_id: ReachableId, handoffs: Handoffs, caller: StaffOnly, settings: SettingsDep
) -> HandoffOut:
    """Take the conversation over: the first claim wins, a later one gets 409."""
    try:
        claimed = await handoffs.claim(handoff_id, caller.name or "staff")
    except HandoffConflict as lost:
        raise HTTPException(status.HTTP_409_CONFLICT, str(lost)) from lost
    return HandoffOut.of(found(claimed, handoff_id), settings.knowledge)


@router.post(
    "/{handoff_id}/messages",
    status_code=status.HTTP_201_CREATED,
    responses=documented(400, 401, 403, 404, 413, 422, 503) | CONFLICT | UNDELIVERED,
)
async def reply_to_client(
    handoff_id: ReachableId, body: StaffReplyIn, handoffs: Handoffs, caller: StaffOnly
) -> MessageOut:
    """Reply in the client's chat under your name (a claimed handoff of yours); stored in
    the transcript as a `staff` message."""
    try:
        message = await handoffs.reply(
            handoff_id, caller.name or "staff", body.text, from_draft=body.from_draft
        )
    except HandoffConflict as refused:
        raise HTTPException(status.HTTP_409_CONFLICT, str(refused)) from refused
    except Undelivered as error:
        raise HTTPException(status.HTTP_502_BAD_GATEWAY, str(error)) from error
    if message is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no handoff {handoff_id}")
    return MessageOut.model_validate(message)


@router.post("/{handoff_id}/resolve", responses=documented(401, 403, 404, 422, 503) | CONFLICT)
async def resolve_handoff(
    handoff_id: ReachableId, handoffs: Handoffs, caller: StaffOnly, settings: SettingsDep
) -> HandoffOut:
    """Close the handoff; the bot answers the conversation again."""
    try:
        resolved = await handoffs.resolve(handoff_id, caller.name or "staff")
    except HandoffConflict as refused:
        raise HTTPException(status.HTTP_409_CONFLICT, str(refused)) from refused
    return HandoffOut.of(found(resolved, handoff_id), settings.knowledge)


@router.post("/{handoff_id}/draft/dismiss", responses=documented(401, 403, 404, 422, 503))
async def dismiss_draft(
    handoff_id: ReachableId, handoffs: Handoffs, settings: SettingsDep
) -> HandoffOut:
    """Set the drafted reply aside; nothing reaches the client's chat."""
    dismissed = await handoffs.dismiss_draft(handoff_id)
    return HandoffOut.of(found(dismissed, handoff_id), settings.knowledge)


@asynccontextmanager
async def telegram_messenger(app: FastAPI) -> AsyncIterator[None]:
    """Staff replies reach Telegram chats from this process too: through the webhook
    bot when it runs here (bot/application.py sets it), else a Bot API client of its own."""
    runtime: Runtime = app.state.runtime
    handoffs, token = runtime.chat.handoffs, runtime.settings.telegram.token
    if handoffs is None or token is None or handoffs.messenger is not None:
        yield
        return
    from telegram import Bot  # loaded only when a bot runs

    from bot.handoff import TelegramMessenger

    bot = Bot(token.get_secret_value(), base_url=runtime.settings.telegram.api_base_url)
    async with bot:
        handoffs.messenger = TelegramMessenger(bot, runtime.settings, runtime.sessions)
        try:
            yield
        finally:
            handoffs.messenger = None
