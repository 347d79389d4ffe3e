"""Group context (telegram.group_context `all`): the group messages not addressed to the
bot are kept, with their author, until the next answered turn of their conversation takes
them in; a reset drops them with the rest of the context."""

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agent.messages import user_content
from app.db.models import TelegramChatMessage

# More than the message limit holds in any case; older ones go when the turn takes these.
MOST_RECENT = 200


class GroupContext:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def keep(self, conversation_key: str, author: str | None, text: str) -> None:
        async with self._sessions() as session:
            session.add(
                TelegramChatMessage(conversation_key=conversation_key, author=author, text=text)
            )
            await session.commit()

    async def pending(self, conversation_key: str) -> tuple[list[str], int | None]:
        """The latest kept messages as the model sees them (`Ann Lee: …`), oldest first,
        and the id of the last one (for `taken`); no id when there are none."""
        async with self._sessions() as session:
            rows = (
                await session.scalars(
                    select(TelegramChatMessage)
                    .where(TelegramChatMessage.conversation_key == conversation_key)
                    .order_by(TelegramChatMessage.id.desc())
                    .limit(MOST_RECENT)
                )
            ).all()
        lines = [user_content(row.author, row.text) for row in reversed(rows)]
        return lines, rows[0].id if rows else None

    async def taken(self, conversation_key: str, up_to: int | None = None) -> None:
        """The messages up to id `up_to` (all: None) are in a stored turn now, or reset."""
        statement = delete(TelegramChatMessage).where(
            TelegramChatMessage.conversation_key == conversation_key
        )
        if up_to is not None:
            statement = statement.where(TelegramChatMessage.id <= up_to)
        async with self._sessions() as session:
            await session.execute(statement)
            await session.commit()

    async def forget_before(self, cutoff: datetime) -> None:
        """Drop what chats said and never asked about; it is stale as context by now."""
        async with self._sessions() as session:
            await session.execute(
                delete(TelegramChatMessage).where(TelegramChatMessage.created_at < cutoff)
            )
            await session.commit()
