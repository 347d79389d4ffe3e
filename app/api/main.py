"""The FastAPI app factory: thin routes over the shared Runtime."""

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from app.api import conversations, health
from app.chat.service import InvalidTurn, TurnFailed
from app.runtime import Runtime
from app.settings import Settings, get_settings


def _describe(error: Mapping[str, Any]) -> str:
    location = ".".join(str(part) for part in error.get("loc", ())[1:])  # drop "body"/"path"
    return f"{location}: {error['msg']}" if location else str(error["msg"])


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.runtime = Runtime.from_settings(settings)
        yield
        await app.state.runtime.aclose()

    app = FastAPI(
        title="supportbot",
        version="0.1.0",
        description="Customer-support chatbot with cache-aware memory profiles.",
        lifespan=lifespan,
    )
    app.include_router(health.router)
    app.include_router(conversations.router)

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
            {
                "detail": "The assistant could not answer this time; your message was kept. "
                "Please try again.",
            },
            status_code=status.HTTP_502_BAD_GATEWAY,
        )

    return app
