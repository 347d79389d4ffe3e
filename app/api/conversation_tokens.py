"""Conversations of the anonymous callers a proxy passes on to an open API (no API keys).

Behind a proxy on the same host every internet caller arrives from 127.0.0.1, so an
anonymous request that names a client in a forwarding header (app/api/auth.py) is treated
as public: it may start a conversation, and its first reply gives a token (the
X-Conversation-Token header and the reply's `conversation_token`); reading or writing that
conversation afterwards takes the token in the same header. Any other conversation, one a
local client started included, is refused to it whatever its key. Only the token's SHA-256
is stored."""

import hashlib
import secrets

from fastapi import HTTPException, Request, status
from sqlalchemy.exc import IntegrityError

from app.api.auth import Caller
from app.db import queries
from app.runtime import Runtime

TOKEN_HEADER = "X-Conversation-Token"


def _sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _not_theirs(key: str) -> HTTPException:
    """One answer whether or not the conversation exists: a refusal reveals nothing."""
    return HTTPException(
        status.HTTP_403_FORBIDDEN,
        f"conversation {key!r} is not one this caller started: an anonymous caller behind a "
        f"proxy reaches only its own conversations, with the {TOKEN_HEADER} header of their "
        "first reply",
    )


async def check_started_by(caller: Caller, key: str, request: Request, runtime: Runtime) -> None:
    """Refuse a caller a proxy passed on, unless it sends the token `key` was started with."""
    if not caller.through_proxy:
        return
    token = request.headers.get(TOKEN_HEADER)
    async with runtime.sessions() as session:
        stored = await queries.conversation_token(session, key)
    if token is None or stored is None or not secrets.compare_digest(stored, _sha256(token)):
        raise _not_theirs(key)


async def start_or_check(
    caller: Caller, key: str, request: Request, runtime: Runtime
) -> str | None:
    """The token of the conversation this turn starts for a caller a proxy passed on; None
    when the turn goes on with a conversation the caller's token opens (or the caller came
    directly). A conversation that exists, or another caller starts first, is refused."""
    if not caller.through_proxy:
        return None
    if TOKEN_HEADER.lower() in request.headers:
        await check_started_by(caller, key, request, runtime)
        return None
    token = secrets.token_urlsafe(32)
    try:
        async with runtime.sessions() as session:
            claimed = await queries.claim_conversation(session, key, _sha256(token))
            await session.commit()
    except IntegrityError:  # another caller claimed the key first
        claimed = False
    if not claimed:
        raise _not_theirs(key)
    return token
