"""The people of one conversation, as memory scopes: each who wrote a remembered turn
in it (`turns.memory_scope`), under the name they last wrote with, and a Telegram chat's
shared memory after them."""

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Message, Turn
from app.memory.scope import SEPARATOR, is_chat_wide, read_scopes

EVERYONE = "everyone in the chat"  # who a Telegram chat's shared memory belongs to


@dataclass(frozen=True)
class Person:
    scope: str
    who: str  # the name they last wrote under here; EVERYONE for a chat's shared memory


async def people_of(session: AsyncSession, conversation_id: int) -> list[Person]:
    """Who wrote in the conversation with memory on, in the order they first wrote; the
    chat's shared memory last."""
    said = await session.execute(
        select(Turn.memory_scope, Message.author)
        .join(
            Message,
            (Message.conversation_id == Turn.conversation_id)
            & (Message.turn == Turn.number)
            & (Message.role == "user"),
        )
        .where(Turn.conversation_id == conversation_id, Turn.memory_scope.is_not(None))
        .order_by(Message.seq)
    )
    names: dict[str, str] = {}
    for scope, author in said:
        assert scope is not None  # the query's condition
        for read in read_scopes(scope):
            if is_chat_wide(read):
                names.setdefault(read, EVERYONE)
            elif author or read not in names:  # no name: the scope's own id
                names[read] = author or read.rsplit(SEPARATOR, 1)[-1]
    people = [Person(scope, who) for scope, who in names.items()]
    return sorted(people, key=lambda person: is_chat_wide(person.scope))
