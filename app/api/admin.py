"""Admin endpoints: (re)ingest a documentation folder into the knowledge base."""

import secrets
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field

from app.api.deps import RuntimeDep, SettingsDep
from knowledge.store import KnowledgeBase

router = APIRouter(prefix="/v1/admin", tags=["admin"])
_bearer = HTTPBearer(auto_error=False)


def require_admin(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    if settings.admin_token is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "no admin token is configured")
    if credentials is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    expected = settings.admin_token.get_secret_value()
    if not secrets.compare_digest(credentials.credentials.encode(), expected.encode()):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "wrong admin token")


def get_knowledge_base(runtime: RuntimeDep) -> KnowledgeBase:
    return runtime.knowledge


class IngestRequest(BaseModel):
    path: str = Field(description="folder or file on the server")
    collection: str | None = None


@router.post("/kb/ingest", dependencies=[Depends(require_admin)])
def ingest_knowledge(
    request: IngestRequest, kb: Annotated[KnowledgeBase, Depends(get_knowledge_base)]
) -> dict[str, Any]:
    """Mirror a folder into the knowledge base; returns the ingestion report. A sync
    endpoint on purpose: FastAPI runs it in a worker thread, off the event loop."""
    path = Path(request.path)
    if not path.exists():
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no such file or folder: {path}")
    return kb.ingest(path, request.collection).as_dict()
