"""The documentation kept in sync on a schedule, over HTTP: the scheduler runs in the
background for the app's lifetime (`scheduled_syncs`), and `GET /v1/admin/kb/sources` shows
how each configured source's syncs went, to the admin token and staff."""

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from functools import partial

from fastapi import APIRouter, Depends, FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field

from app.api.auth import get_caller, require_staff
from app.api.deps import RuntimeDep, SettingsDep
from app.api.errors import documented
from app.api.schemas import UtcDatetime
from app.knowledge_sources import runs
from app.knowledge_sources.scheduler import SourceScheduler
from app.runtime import Runtime
from knowledge.mirror import mirror_source

router = APIRouter(prefix="/v1/admin/kb", tags=["admin"])


@asynccontextmanager
async def scheduled_syncs(app: FastAPI) -> AsyncIterator[None]:
    """Syncs the configured sources when they are due, while the app runs; on shutdown the
    running sync ends after its current document."""
    runtime: Runtime = app.state.runtime
    knowledge = runtime.settings.knowledge
    scheduler = SourceScheduler(
        knowledge.sources, runtime.sessions, partial(mirror_source, runtime.knowledge, knowledge)
    )
    app.state.source_scheduler = scheduler
    async with scheduler.running():
        yield


async def admin_or_staff(request: Request, settings: SettingsDep) -> None:
    """The admin token, or staff credentials (an API key: 403; nothing: 401)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    admin = settings.admin_token
    given = token.encode() if scheme.lower() == "bearer" and token else None
    if (
        admin is not None
        and given
        and secrets.compare_digest(given, admin.get_secret_value().encode())
    ):
        return
    await require_staff(await get_caller(request, settings))


class CountsOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    added: int = Field(description="documents new to the collection")
    changed: int = Field(description="documents whose passages were replaced")
    removed: int = Field(description="documents gone from the folder or the site")
    unchanged: int


class SourceOut(BaseModel):
    location: str = Field(description="the folder or the help center's URL")
    collection: str
    every_hours: float
    running: bool = Field(description="a replica is syncing it now")
    last_started_at: UtcDatetime | None
    last_finished_at: UtcDatetime | None
    last_counts: CountsOut | None = Field(
        description="documents of the last sync that went through; null: none yet"
    )
    last_error: str | None = Field(
        description="why the last sync failed, or which documents it could not read; null "
        "when it went through clean"
    )
    next_due_at: UtcDatetime | None = Field(
        description="when it is synced next; null: no sync has ended yet, so it is due now"
    )

    @classmethod
    def of(cls, status: runs.SourceStatus) -> "SourceOut":
        return cls(
            location=status.source.location,
            collection=status.source.collection or "",
            every_hours=status.source.every_hours,
            running=status.running,
            last_started_at=status.last_started_at,
            last_finished_at=status.last_finished_at,
            last_counts=CountsOut.model_validate(status.counts) if status.counts else None,
            last_error=status.last_error,
            next_due_at=status.next_due_at,
        )


class SourcesOut(BaseModel):
    sources: list[SourceOut]


@router.get(
    "/sources",
    dependencies=[Depends(admin_or_staff)],
    responses=documented(401, 403),
)
async def knowledge_sources(runtime: RuntimeDep) -> SourcesOut:
    """The folders and help centers of SUPPORTBOT_KNOWLEDGE__SOURCES, each with its last
    sync (when, its documents +added ~changed -removed =unchanged, its error) and when it
    is synced next."""
    async with runtime.sessions() as session:
        found = await runs.statuses(session, runtime.settings.knowledge.sources, datetime.now(UTC))
    return SourcesOut(sources=[SourceOut.of(status) for status in found])
