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
    """Ready when the database and the vector store answer; `down` names those that do
    not. The LLM is not probed: the only sure check is a (paid) model call, and a turn
    whose model fails is retried, falls back and ends explicitly anyway."""
    checks = {
        "database": await runtime.database_ready(),
        # A local Qdrant call takes the store's lock: off the event loop.
        "vector_store": await asyncio.to_thread(runtime.knowledge.ping),
    }
    down = [part for part, ok in checks.items() if not ok]
    return JSONResponse(
        {"ready": not down, **checks, "down": down}, status_code=503 if down else 200
    )
