"""FastAPI dependencies: the process's Runtime and what hangs off it.

Dependencies that do no blocking work are `async def`: FastAPI runs a plain `def` one on a
worker thread, a thread hop per dependency per request."""

from typing import Annotated

from fastapi import Depends, Request

from app.chat.service import ChatService
from app.runtime import Runtime
from app.settings import Settings


async def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def get_app_settings(runtime: Annotated[Runtime, Depends(get_runtime)]) -> Settings:
    return runtime.settings


async def get_chat_service(runtime: Annotated[Runtime, Depends(get_runtime)]) -> ChatService:
    return runtime.chat


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
ChatServiceDep = Annotated[ChatService, Depends(get_chat_service)]
