"""The FastAPI app factory: thin routes over the shared Runtime."""

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline

from app.api import admin, conversations, health, telegram, widget
from app.chat.service import InvalidTurn, TurnFailed
from app.observability.metrics import exposition
from app.observability.redact import configured_secrets, install_log_redaction
from app.runtime import Runtime
from app.settings import Settings, get_settings


def _describe(error: Mapping[str, Any]) -> str:
    location = ".".join(str(part) for part in error.get("loc", ())[1:])  # drop "body"/"path"
    return f"{location}: {error['msg']}" if location else str(error["msg"])


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Here, not in create_app: uvicorn has set up its log handlers by now.
        install_log_redaction(configured_secrets(settings))
        app.state.runtime = Runtime.from_settings(settings)
        await app.state.runtime.start()
        async with telegram.webhook_bot(app):
            yield
        await app.state.runtime.aclose()

    # /docs and /redoc with their assets served by the app: they work with no network.
    app = FastAPIOffline(
        title="supportbot",
        version="0.1.0",
        description="Customer-support chatbot with cache-aware memory profiles.",
        lifespan=lifespan,
    )
    app.include_router(health.router)
    app.include_router(conversations.router)
    app.include_router(widget.router)
    app.include_router(telegram.router)
    app.include_router(admin.router)
    app.mount("/widget/static", StaticFiles(directory=widget.WIDGET_DIR), name="widget-static")
    if settings.widget.allowed_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.widget.allowed_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type"],
        )

    @app.get("/metrics", include_in_schema=False)
    async def prometheus_metrics() -> Response:
        body, content_type = exposition()
        return Response(body, media_type=content_type)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        detail = "; ".join(_describe(error) for error in exc.errors())
        return JSONResponse({"detail": detail}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)

    @app.exception_handler(InvalidTurn)
    async def invalid_turn(_: Request, exc: InvalidTurn) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)

    @app.exception_handler(TurnFailed)
    async def turn_failed(_: Request, exc: TurnFailed) -> JSONResponse:
        return JSONResponse(
            {"detail": exc.detail},
            status_code=status.HTTP_502_BAD_GATEWAY,
        )

    return app
