"""Every error the API sends is an ErrorOut (`{"detail": "..."}`), and each route lists
the codes it can send, so clients and the OpenAPI schema agree."""

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from app.api.schemas import ErrorOut
from app.chat.service import InvalidTurn

_MEANING = {
    400: "the body is not readable (e.g. not UTF-8)",
    401: "no credentials where they are required, or unknown ones",
    403: "these credentials may not do this (key prefix, audience, staff only)",
    404: "no such conversation or turn",
    413: "the body is larger than SUPPORTBOT_API__MAX_BODY_BYTES",
    422: "the input was refused; nothing was stored",
    429: "a rate limit is reached; Retry-After says when to try again",
    502: "the model or a tool failed; the user's message was stored",
    503: "the endpoint is not configured",
}


def documented(*codes: int, streaming: bool = False) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route that can answer with these error codes. A streaming
    route's errors are JSON too (sent before any event): named by reference, since FastAPI
    would file a model under the route's own media type."""
    if streaming:
        json_error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}
        return {code: {"description": _MEANING[code], "content": json_error} for code in codes}
    return {code: {"model": ErrorOut, "description": _MEANING[code]} for code in codes}


def _describe(error: Mapping[str, Any]) -> str:
    location = ".".join(str(part) for part in error.get("loc", ())[1:])  # drop "body"/"path"
    message = str(error["msg"])
    if error.get("type") == "value_error":  # our own validators: their message, unprefixed
        message = str(error.get("ctx", {}).get("error", message))
    return f"{location}: {message}" if location else message


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"detail": str(exc.detail)}, exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        detail = "; ".join(_describe(error) for error in exc.errors())
        return JSONResponse({"detail": detail}, status.HTTP_422_UNPROCESSABLE_CONTENT)

    @app.exception_handler(InvalidTurn)
    async def invalid_turn(_: Request, exc: InvalidTurn) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status.HTTP_422_UNPROCESSABLE_CONTENT)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        # Starlette raises the exception again after this response: the server logs it.
        return JSONResponse({"detail": "internal error"}, status.HTTP_500_INTERNAL_SERVER_ERROR)
