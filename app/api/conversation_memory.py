"""The memory of a conversation's people, for staff (the handoff queue's Memory panel):
what is remembered of each person who wrote in it, and forgetting one item.

Staff read every client conversation, as the queue and the transcript do; a staff
member's own memory stays theirs, so another's widget conversation is refused (403) as in
/v1/people. An API key gets 403 and an anonymous caller 401: no client reaches this."""

import logging

from fastapi import APIRouter, Depends, HTTPException, status
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.auth import Caller, StaffDep, StaffFirst, require_staff
from app.api.conversations import ConversationKey
from app.api.deps import RuntimeDep
from app.api.errors import documented
from app.api.people import ItemId
from app.api.schemas import ConversationMemoryOut, ForgottenOut, MemoryItemOut, PersonMemoryOut
from app.db import queries
from app.memory import store
from app.memory.people import Person, people_of
from app.memory.scope import is_staff, widget_scope

log = logging.getLogger(__name__)

router = APIRouter(
    prefix="/v1/conversations",
    tags=["people"],
    dependencies=[Depends(require_staff)],
    route_class=StaffFirst,
)


async def _people(session: AsyncSession, key: str, caller: Caller) -> list[Person]:
    """The conversation's people, if it exists and this staff member may see their memory."""
    conversation = await queries.get_conversation(session, key)
    if conversation is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no conversation {key!r}")
    people = await people_of(session, conversation.id)
    own = widget_scope(caller.name or "")
    if any(is_staff(person.scope) and person.scope != own for person in people):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "staff reach their own memory only")
    return people


@router.get("/{key}/memory", responses=documented(401, 403, 404, 422))
async def get_conversation_memory(
    key: ConversationKey, caller: StaffDep, runtime: RuntimeDep
) -> ConversationMemoryOut:
    """What is remembered of each person who wrote in the conversation (their memory from
    every conversation in their scope), with each item's source message."""
    async with runtime.sessions() as session:
        people = await _people(session, key, caller)
        items = await store.active_items(session, [person.scope for person in people])
    return ConversationMemoryOut(
        conversation_key=key,
        people=[
            PersonMemoryOut(
                scope=person.scope,
                who=person.who,
                items=[MemoryItemOut.of(item) for item in items if item.scope == person.scope],
            )
            for person in people
        ],
    )


@router.delete("/{key}/memory/{item}", responses=documented(401, 403, 404, 422))
async def forget_conversation_memory_item(
    key: ConversationKey, item: ItemId, caller: StaffDep, runtime: RuntimeDep
) -> ForgottenOut:
    """Forget one item of a person of this conversation (and the older statements it
    replaced); its words leave the archives recall_history searches."""
    async with runtime.sessions() as session:
        people = await _people(session, key, caller)
        forgotten = 0
        for person in people:  # the item is in one scope at most
            forgotten += (await store.forget(session, person.scope, item)).items
        await session.commit()
    if not forgotten:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such item of this conversation's people")
    log.info("%s forgot memory item %s of a person of %s", caller.name, item, key)
    return ForgottenOut(forgotten=forgotten)
