"""Conversations over plain HTTP: post a message, read the history."""

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, status

from app.api.deps import ChatServiceDep
from app.api.schemas import ConversationOut, ErrorOut, MessageIn, MessageOut, ReplyOut
from app.chat.service import TurnRequest

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])

ConversationKey = Annotated[str, Path(min_length=1, max_length=255, examples=["demo"])]


@router.post(
    "/{key}/messages",
    response_model=ReplyOut,
    responses={422: {"model": ErrorOut}, 502: {"model": ErrorOut}},
)
async def post_message(key: ConversationKey, body: MessageIn, chat: ChatServiceDep) -> ReplyOut:
    """Run one turn and return the answer with its citations and token usage."""
    reply = await chat.handle_turn(
        TurnRequest(
            channel="api",
            conversation_key=key,
            audience=body.audience,
            author=body.author,
            text=body.text,
        )
    )
    return ReplyOut.model_validate(asdict(reply))


@router.get("/{key}", response_model=ConversationOut, responses={404: {"model": ErrorOut}})
async def get_conversation(key: ConversationKey, chat: ChatServiceDep) -> ConversationOut:
    """The whole transcript, including tool calls and what memory took out of the context."""
    found = await chat.history(key)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no conversation {key!r}")
    conversation, messages = found
    return ConversationOut(
        key=conversation.key,
        channel=conversation.channel,
        audience=conversation.audience,
        profile=conversation.profile,
        messages=[MessageOut.model_validate(m) for m in messages],
    )
