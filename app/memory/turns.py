"""Memory in a turn's life: the block a new conversation starts with, and what a turn
writes — the facts its fold extracted (no extra model call) and an explicit
"remember that …"."""

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.agent.memory.summarizer import StatedFact, stated_facts
from app.db.models import Conversation
from app.memory import store
from app.memory.facts import remembered
from app.memory.scope import read_scopes, shared_scope
from app.memory.store import MemoryBlock
from app.settings import PeopleMemorySettings

ANONYMOUS_AUTHOR = "user"  # how the summary names a user message without an author
Wanted = tuple[str, str, int | None]  # scope, the fact, its source message (recall id)


def placed(scope: str, author: str | None, facts: Sequence[StatedFact]) -> list[Wanted]:
    """Where the stated `facts` of a turn by `author` in `scope` go: the author's to the
    scope, another participant's in a Telegram chat to the chat's shared memory (named),
    elsewhere nowhere. A folded "remember that …" was kept as said when it was said."""
    shared = shared_scope(scope)
    wanted: list[Wanted] = []
    for stated in facts:
        text = remembered(stated.text) or stated.text
        if stated.author in (author or ANONYMOUS_AUTHOR, None):
            wanted.append((scope, text, stated.recall_id))
        elif shared:
            wanted.append((shared, f"{stated.author}: {text}", stated.recall_id))
    return wanted


@dataclass(frozen=True)
class PeopleMemory:
    settings: PeopleMemorySettings

    def scope_of(self, audience: str, scope: str | None) -> str | None:
        """The turn's memory scope, or None: not remembered."""
        return scope if scope and audience in self.settings.audiences else None

    async def block(
        self, session: AsyncSession, scope: str, conversation: Conversation
    ) -> MemoryBlock | None:
        """The block this conversation's context starts with (the same on each of its
        turns until a reset, while nothing is forgotten); its items count as used now.
        The caller's transaction (the turn's first) commits it."""
        scopes = read_scopes(scope)
        await store.expire(session, scopes, self.settings.retention_days)
        began = await store.context_began(session, conversation)
        block = await store.memory_block(session, scopes, began, self.settings.block_tokens)
        if block:
            await store.touch(session, block.item_ids)
        return block

    async def write(
        self,
        session: AsyncSession,
        scope: str,
        conversation_key: str,
        author: str | None,
        said: tuple[str, int | None] | None,
        summary: str | None,
        folded: Collection[str] = (),
    ) -> list[int]:
        """Keep an explicit "remember that …" (`said`: the message and its id) and the facts
        a new `summary` took from the messages it `folded` (their ids; a fact kept from the
        previous summary was written by its own fold, or forgotten since): the author's go
        to `scope`, the others' in a Telegram chat to the chat's shared memory, through the
        caller's transaction. Returns the new items' ids."""
        wanted: list[Wanted] = []
        if said and (fact := remembered(said[0])):
            wanted.append((scope, fact, said[1]))
        if summary:
            facts = [
                stated
                for stated in stated_facts(summary)
                if stated.recall_id is None or str(stated.recall_id) in folded
            ]
            wanted += placed(scope, author, facts)
        return await self.keep(session, conversation_key, wanted)

    async def keep(
        self, session: AsyncSession, conversation_key: str, wanted: Sequence[Wanted]
    ) -> list[int]:
        kept = []
        for item_scope, text, message_id in wanted:
            item = await store.remember(
                session,
                item_scope,
                text,
                conversation=conversation_key,
                message_id=message_id,
                max_items=self.settings.max_items,
            )
            if item is not None:
                kept.append(item.id)
        return kept
