"""Liveness and readiness."""

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from app.api.deps import RuntimeDep

router = APIRouter(tags=["health"])


class Readiness(BaseModel):
    """What `/readyz` answers, 200 or 503. While the service's code is still loading only
    `ready` and `down` (`["loading"]`) are given (app/api/starting.py)."""

    ready: bool
    database: bool | None = None
    vector_store: bool | None = None
    warmed_up: bool | None = None
    down: list[str]


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "not ready: `down` names what is not"}},
)
async def readyz(runtime: RuntimeDep) -> JSONResponse:
    """Ready when the database and the vector store answer and what the first turn needs
    is loaded (`warmed_up`, a few seconds after start); `down` names what is not (503). The
    LLM is not probed: the only sure check is a (paid) model call, and a turn whose model
    fails is retried, falls back and ends explicitly anyway."""
    checks = {
        "database": await runtime.database_ready(),
        # A local Qdrant call takes the store's lock: off the event loop.
        "vector_store": await asyncio.to_thread(runtime.knowledge.ping),
        "warmed_up": runtime.warmed_up,
    }
    down = [part for part, ok in checks.items() if not ok]
    readiness = Readiness(ready=not down, **checks, down=down)
    return JSONResponse(readiness.model_dump(), status_code=503 if down else 200)
