"""A person's memory over HTTP (app/memory): what the bot keeps of them, and forgetting it.

Each caller reaches its own scope only: an API key the people of its key prefix, a staff
member their own memory. Another tenant's person is simply not there (404)."""

import re
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, status

from app.api.auth import CHALLENGE, CallerDep
from app.api.deps import RuntimeDep
from app.api.errors import documented
from app.api.schemas import ForgottenOut, MemoryItemOut
from app.memory import store
from app.memory.scope import api_scope, widget_scope
from app.settings import CONVERSATION_KEY_PATTERN, staff_name

router = APIRouter(prefix="/v1/people", tags=["people"])

# A person id's characters or a staff name's (letters of any script, spaces, apostrophes):
# `person_scope` reads it as the caller's kind says.
PERSON_PATTERN = r"^[\w .:@'+-]{1,128}$"
PersonId = Annotated[
    str,
    Path(
        pattern=PERSON_PATTERN,
        examples=["u-1842"],
        description="the `person` id the turns gave; for staff, their own name (spaces "
        "percent-encoded: `bob%20smith`)",
    ),
]


def person_scope(person: PersonId, caller: CallerDep) -> str:
    """The memory scope `person` names for this caller, never another tenant's: an API
    key's person id is a conversation key's characters, as the turns' `person` is; a
    staff member's name is read as their sign-in is (any case, spaces between words)."""
    if caller.kind == "backend":
        if not re.fullmatch(CONVERSATION_KEY_PATTERN, person):
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                f"person: a person id matches {CONVERSATION_KEY_PATTERN}",
            )
        return api_scope(caller.key_prefix, person)
    if caller.is_staff:
        try:
            named = staff_name(person)
        except ValueError:
            named = None
        if named is None or named != caller.name:
            raise HTTPException(status.HTTP_403_FORBIDDEN, "staff reach their own memory only")
        return widget_scope(named)
    raise HTTPException(status.HTTP_401_UNAUTHORIZED, "staff credentials or an API key", CHALLENGE)


ScopeDep = Annotated[str, Depends(person_scope)]
ItemId = Annotated[int, Path(ge=1, le=2**31 - 1, description="a memory item's `id`")]


NOT_REMEMBERED = "nothing is remembered of this person"


@router.get(
    "/{person}/memory", response_model=list[MemoryItemOut], responses=documented(401, 403, 404, 422)
)
async def get_memory(scope: ScopeDep, runtime: RuntimeDep) -> list[MemoryItemOut]:
    """What the bot keeps of the person: their current items, oldest first."""
    async with runtime.sessions() as session:
        items = await store.active_items(session, [scope])
    if not items:
        raise HTTPException(status.HTTP_404_NOT_FOUND, NOT_REMEMBERED)
    return [MemoryItemOut.of(item) for item in items]


@router.delete(
    "/{person}/memory", response_model=ForgottenOut, responses=documented(401, 403, 404, 422)
)
async def forget_memory(scope: ScopeDep, runtime: RuntimeDep) -> ForgottenOut:
    """Forget the person: their items go, and so do their statements from the archives that
    recall_history searches; what they said that is not written yet never will be (200
    with 0 when that was all)."""
    return await _forget(runtime, scope, None, NOT_REMEMBERED)


@router.delete(
    "/{person}/memory/{item}",
    response_model=ForgottenOut,
    responses=documented(401, 403, 404, 422),
)
async def forget_item(scope: ScopeDep, item: ItemId, runtime: RuntimeDep) -> ForgottenOut:
    """Forget one item (and the older statements it replaced), its source statements with
    it; 404, changing nothing, when the person has no such item."""
    return await _forget(runtime, scope, item, "no such item in this person's memory")


async def _forget(runtime: RuntimeDep, scope: str, item: int | None, missing: str) -> ForgottenOut:
    """`store.forget` of the scope (one item, or all); 404 saying `missing` when it changed
    nothing (a forget of all that only held back what was not written yet is a 200 of 0)."""
    async with runtime.sessions() as session:
        forgotten = await store.forget(session, scope, item)
        await session.commit()
    if not forgotten:
        raise HTTPException(status.HTTP_404_NOT_FOUND, missing)
    return ForgottenOut(forgotten=forgotten.items)
