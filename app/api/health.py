"""Liveness and readiness."""

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.api.deps import RuntimeDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(runtime: RuntimeDep) -> JSONResponse:
    """Ready when the database and the vector store answer and what the first turn needs
    is loaded (`warmed_up`, a second or two after start); `down` names what is not. The
    LLM is not probed: the only sure check is a (paid) model call, and a turn whose model
    fails is retried, falls back and ends explicitly anyway."""
    checks = {
        "database": await runtime.database_ready(),
        # A local Qdrant call takes the store's lock: off the event loop.
        "vector_store": await asyncio.to_thread(runtime.knowledge.ping),
        "warmed_up": runtime.warmed_up,
    }
    down = [part for part, ok in checks.items() if not ok]
    return JSONResponse(
        {"ready": not down, **checks, "down": down}, status_code=503 if down else 200
    )
