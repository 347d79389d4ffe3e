"""The staff widget: a standalone page, the one-tag embed script, and who is signed in."""

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

from app.api.auth import StaffDep
from app.api.errors import documented
from app.api.schemas import WhoAmIOut

WIDGET_DIR = Path(__file__).resolve().parents[1] / "widget"

router = APIRouter(tags=["widget"])


@router.get("/widget", include_in_schema=False)
async def widget_page() -> FileResponse:
    return FileResponse(WIDGET_DIR / "index.html")


@router.get("/widget/embed.js", include_in_schema=False)
async def embed_script() -> FileResponse:
    return FileResponse(WIDGET_DIR / "embed.js", media_type="text/javascript")


@router.get("/v1/widget/me", responses=documented(401, 403))
async def whoami(caller: StaffDep) -> WhoAmIOut:
    """The signed-in staff member (401 without staff credentials, 403 with an API key)."""
    return WhoAmIOut(name=caller.name)
