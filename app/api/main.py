"""The FastAPI app factory: thin routes over the shared Runtime."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI, Request, status
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline

from app.api import (
    admin,
    answers,
    conversation_memory,
    conversations,
    handoffs,
    health,
    insights,
    knowledge_sources,
    people,
    telegram,
    widget,
)
from app.api.body_limit import BodySizeLimit
from app.api.conversation_tokens import TOKEN_HEADER
from app.api.cross_site import CrossSiteGuard
from app.api.errors import install_error_handlers
from app.api.exposure import refuse_unsafe_exposure
from app.api.rate_limits import TurnLimits
from app.chat.service import TurnFailed
from app.observability.metrics import exposition
from app.observability.redact import configured_secrets, install_log_redaction
from app.runtime import Runtime
from app.settings import Settings, get_settings


async def load_routes(app: FastAPI) -> None:
    """FastAPI builds an included route's request handling (its dependencies, its body
    model) when a request is first matched against it: ~70 ms of CPU on the first turn. A
    request for a path no route takes is matched against every route, and answered 404."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        await client.get("/-/load-routes")


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    refuse_unsafe_exposure(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Here, not in create_app: uvicorn has set up its log handlers by now.
        install_log_redaction(configured_secrets(settings))
        app.state.runtime = Runtime.from_settings(settings)
        await app.state.runtime.start(warm_in_background=True)
        await load_routes(app)
        app.state.runtime.sweep_periodically()
        app.state.turn_limits = TurnLimits(settings.api, settings.observability.metrics_enabled)
        async with (
            telegram.webhook_bot(app),
            handoffs.telegram_messenger(app),
            knowledge_sources.scheduled_syncs(app),
        ):
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
    app.include_router(conversations.staff_router)
    app.include_router(widget.router)
    app.include_router(telegram.router)
    app.include_router(admin.router)
    app.include_router(knowledge_sources.router)
    app.include_router(handoffs.router)
    app.include_router(answers.router)
    app.include_router(insights.router)
    app.include_router(people.router)
    app.include_router(conversation_memory.router)
    app.mount("/widget/static", StaticFiles(directory=widget.WIDGET_DIR), name="widget-static")
    app.add_middleware(BodySizeLimit, max_bytes=settings.api.max_body_bytes)
    app.add_middleware(CrossSiteGuard, allowed_origins=settings.widget.allowed_origins)
    app.add_middleware(widget.WidgetPagePolicy, frame_ancestors=settings.widget.frame_ancestors)
    if settings.widget.allowed_origins:  # added last: outermost, so errors get CORS headers
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

    install_error_handlers(app)

    @app.exception_handler(TurnFailed)
    async def turn_failed(request: Request, exc: TurnFailed) -> JSONResponse:
        # A public caller's first turn that failed: the message may be kept, and only
        # this token reaches it.
        token = getattr(request.state, "conversation_token", None)
        return JSONResponse(
            {"detail": exc.detail},
            status_code=status.HTTP_502_BAD_GATEWAY,
            headers={TOKEN_HEADER: token} if token else None,
        )

    return app
