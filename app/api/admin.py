"""Admin endpoints: (re)ingest a documentation folder into the knowledge base, from the
folders SUPPORTBOT_KNOWLEDGE__INGEST_ROOTS allows (knowledge/roots.py)."""

import secrets
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field

from app.api.auth import guarded_first
from app.api.deps import RuntimeDep, SettingsDep, get_app_settings, get_runtime
from app.api.errors import documented
from app.settings import Settings
from knowledge.roots import NotFound, OutsideRoots, resolve_ingest_path
from knowledge.store import KnowledgeBase

_bearer = HTTPBearer(auto_error=False)


def check_admin(settings: Settings, credentials: HTTPAuthorizationCredentials | None) -> None:
    """The admin token or the refusal: 503 none configured, 401 none sent, 403 another."""
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


async def admin_request(request: Request) -> None:
    """The admin check before FastAPI reads the body (`guarded_first`): a malformed body
    from anyone else gets the refusal, not a 422 that shows how the body is formed."""
    check_admin(await get_app_settings(await get_runtime(request)), await _bearer(request))


def require_admin(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """The same check as a dependency: it puts the bearer scheme in the OpenAPI document."""
    check_admin(settings, credentials)


router = APIRouter(prefix="/v1/admin", tags=["admin"], route_class=guarded_first(admin_request))


def get_knowledge_base(runtime: RuntimeDep) -> KnowledgeBase:
    return runtime.knowledge


class IngestRequest(BaseModel):
    path: str = Field(
        min_length=1,
        max_length=4096,
        pattern=r"^[^\x00-\x1f\x7f]+$",
        description="a folder or file under one of the ingest roots; a relative path is "
        "taken relative to the first root",
    )
    collection: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="the Qdrant collection; the configured one when unset",
    )


class IngestOut(BaseModel):
    """What the ingest changed; documents are named by their path inside the folder."""

    collection: str
    documents_added: int
    documents_updated: int
    documents_deleted: int
    documents_unchanged: int
    chunks_added: int
    chunks_deleted: int
    chunks_unchanged: int
    skipped: dict[str, str] = Field(description="document -> why it has nothing to index")
    errors: dict[str, str] = Field(description="document -> what is wrong with it")
    seconds: float


@router.post(
    "/kb/ingest",
    dependencies=[Depends(require_admin)],
    responses=documented(400, 401, 403, 404, 413, 422, 503),
)
def ingest_knowledge(
    request: IngestRequest,
    settings: SettingsDep,
    kb: Annotated[KnowledgeBase, Depends(get_knowledge_base)],
) -> IngestOut:
    """Mirror a folder into the knowledge base; returns the ingestion report. A sync
    endpoint on purpose: FastAPI runs it in a worker thread, off the event loop."""
    roots = settings.knowledge.ingest_roots or [settings.knowledge.sample_path]
    try:
        path = resolve_ingest_path(request.path, roots)
    except OutsideRoots as refused:
        raise HTTPException(status.HTTP_403_FORBIDDEN, str(refused)) from refused
    except NotFound as missing:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(missing)) from missing
    except (OSError, ValueError) as unusable:  # a name too long, a link loop, …
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, "not a usable path"
        ) from unusable
    real_roots = [root.resolve() for root in roots]
    report = kb.ingest(path, request.collection, confined_to=real_roots)
    return IngestOut.model_validate(report.as_dict())
