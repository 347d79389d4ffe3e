"""Who answers a turn: the bot (the model), a person, or nobody yet (a person has the chat).

The turn asks its `TurnRouter` (the handoff service, when handoffs are on) once, in its
first transaction, what it reads there deciding as of the stored message; and runs one
lifecycle whatever the answer: the user's message stored first, the outcome stored with
the turn, the caller told once. A route that takes the turn from the bot stores a notice
(or nothing) instead of calling the model."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from app.chat.outcome import TurnOutcome
from app.chat.store import BegunTurn, HeldConversation
from app.chat.types import TurnReply, TurnRequest
from app.db.models import Conversation

RouteKind = Literal["bot", "handed_off", "quiet", "bot_back"]
# Run once the conversation is released and the caller told (e.g. show staff a card).
FollowUp = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Route:
    kind: RouteKind  # bot: the model answers; the others take the turn (`TurnOutcome`)
    detail: Any = None  # the router's own (what it decided, the handoff it found)

    @property
    def takes_turn(self) -> bool:
        return self.kind != "bot"


BOT = Route("bot")


@dataclass(frozen=True)
class Taken:
    """What a route that took the turn stores as its answer."""

    notice: str  # "" for none
    outcome: TurnOutcome
    follow_up: FollowUp | None = None
    handoff: str | None = None  # `TurnReply.handoff`


class TurnRouter(Protocol):
    async def prepare(self, request: TurnRequest) -> Any:
        """What deciding needs from the message alone (no database), worked out before
        the turn holds the conversation; passed to `route`."""
        ...

    async def route(
        self, session: AsyncSession, conversation: Conversation, request: TurnRequest, prepared: Any
    ) -> Route:
        """Decided in the turn's first transaction (`session`), the message stored; BOT
        when in doubt."""
        ...

    async def take(
        self, held: HeldConversation, begun: BegunTurn, request: TurnRequest, route: Route
    ) -> Taken:
        """The turn without the model (inside its lifecycle)."""
        ...

    async def after_answer(
        self,
        held: HeldConversation,
        begun: BegunTurn,
        request: TurnRequest,
        reply: TurnReply,
        route: Route,
    ) -> tuple[TurnReply, FollowUp | None]:
        """After the bot's answer is stored (on the bot's `route`): may hand over still
        (the reply then says so)."""
        ...
