"""FastAPI dependencies: the process's Runtime and what hangs off it."""

from typing import Annotated

from fastapi import Depends, Request

from app.chat.service import ChatService
from app.runtime import Runtime
from app.settings import Settings


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def get_app_settings(runtime: Annotated[Runtime, Depends(get_runtime)]) -> Settings:
    return runtime.settings


def get_chat_service(runtime: Annotated[Runtime, Depends(get_runtime)]) -> ChatService:
    return runtime.chat


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
ChatServiceDep = Annotated[ChatService, Depends(get_chat_service)]
