"""Liveness and readiness."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.api.deps import RuntimeDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(runtime: RuntimeDep) -> JSONResponse:
    """Ready when the database and the vector store answer."""
    checks = {"database": await runtime.database_ready(), "vector_store": runtime.knowledge.ping()}
    ready = all(checks.values())
    return JSONResponse({"ready": ready, **checks}, status_code=200 if ready else 503)
