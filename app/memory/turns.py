"""Memory in a turn's life: the block a new conversation starts with, and what a turn
writes — the facts its fold extracted (no extra model call) and an explicit
"remember that …"."""

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.agent.memory.summarizer import StatedFact, stated_facts
from app.db.models import Conversation, Message, Turn
from app.memory import store
from app.memory.facts import remembered
from app.memory.scope import read_scopes, shared_scope
from app.memory.store import MemoryBlock
from app.settings import PeopleMemorySettings

log = logging.getLogger(__name__)

ANONYMOUS_AUTHOR = "user"  # how the summary names a user message without an author
Wanted = tuple[str, str, int | None]  # scope, the fact, its source message (recall id)


@dataclass(frozen=True)
class Source:
    """Who said a message a fact came from: the memory scope of the turn that carried it,
    and the names it was written under (the summary's own name for a missing one)."""

    scope: str
    authors: frozenset[str]


def placed(facts: Sequence[StatedFact], sources: Mapping[int, Source]) -> list[Wanted]:
    """Where the stated `facts` go: to the scope of the turn their source message (their
    recall id) came in, never by the name the summary gives them, which anyone can write
    (two people of one API key may both be "Sam"). A statement of the message's own author
    goes to that scope; another participant's (a Telegram group's words quoted in the
    message) to the chat's shared memory, named; a fact without a known source nowhere. A
    folded "remember that …" was kept as said when it was said."""
    wanted: list[Wanted] = []
    for stated in facts:
        source = sources.get(stated.recall_id) if stated.recall_id is not None else None
        if source is None:
            continue
        text = remembered(stated.text) or stated.text
        shared = shared_scope(source.scope)
        if stated.author is None or stated.author in source.authors:
            wanted.append((source.scope, text, stated.recall_id))
        elif shared:
            wanted.append((shared, f"{stated.author}: {text}", stated.recall_id))
    return wanted


async def folded_sources(
    session: AsyncSession, conversation_id: int, folded: Mapping[str, Sequence[int]]
) -> dict[int, Source]:
    """The sources of the user messages a fold took in (`folded`: each folded message's id
    and the stored messages it stands for, several for a note of unanswered messages), by
    recall id; one whose messages came in turns of more than one scope, or of none, has
    no known source."""
    members = {stored for ids in folded.values() for stored in ids}
    said = await session.execute(
        select(Message.id, Message.author, Turn.memory_scope)
        .join(
            Turn,
            (Turn.conversation_id == Message.conversation_id) & (Turn.number == Message.turn),
        )
        .where(
            Message.conversation_id == conversation_id,
            Message.id.in_(members),
            Message.role == "user",
        )
    )
    by_id = {message_id: (author, scope) for message_id, author, scope in said}
    sources: dict[int, Source] = {}
    for recall_id, ids in folded.items():
        found = [by_id[i] for i in ids if i in by_id]
        scopes = {scope for _, scope in found}
        if recall_id.isdigit() and len(found) == len(ids) and len(scopes) == 1:
            (scope,) = scopes
            if scope is not None:
                authors = frozenset(author or ANONYMOUS_AUTHOR for author, _ in found)
                sources[int(recall_id)] = Source(scope, authors)
    return sources


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
        conversation: Conversation,
        said: tuple[str, int | None] | None,
        summary: str | None,
        folded: Mapping[str, Sequence[int]] | None = None,
    ) -> list[int]:
        """Keep an explicit "remember that …" of the turn's person (`said`: the message and
        its id) and the facts a new `summary` took from the messages it `folded` (their ids
        and the stored messages each stands for; a fact kept from the previous summary was
        written by its own fold, or forgotten since), each where `placed` puts it, through
        the caller's transaction. Returns the new items' ids."""
        wanted: list[Wanted] = []
        if said and (fact := remembered(said[0])):
            wanted.append((scope, fact, said[1]))
        if summary and folded:
            sources = await folded_sources(session, conversation.id, folded)
            wanted += placed(stated_facts(summary), sources)
        return await self.keep(session, conversation.key, wanted)

    async def refusal(self, session: AsyncSession, scope: str, text: str) -> str | None:
        """Why `text` cannot be kept for `scope` (too long, or its tenant is full); None
        when it can."""
        limits = self.settings
        if len(text) > limits.max_item_chars:
            return (
                f"an item to remember holds at most {limits.max_item_chars} characters "
                f"(this one has {len(text)}): say it shorter"
            )
        if await store.tenant_items(session, scope) >= limits.max_tenant_items:
            return (
                f"the memory of this tenant is full ({limits.max_tenant_items} items): "
                "forget some first"
            )
        return None

    async def refusal_of_turn(self, session: AsyncSession, scope: str, text: str) -> str | None:
        """Why a turn saying `text` is refused before anything of it is stored: a
        "remember that …" that cannot be kept; None for any other message."""
        fact = remembered(text)
        return await self.refusal(session, scope, fact) if fact else None

    async def keep(
        self, session: AsyncSession, conversation_key: str, wanted: Sequence[Wanted]
    ) -> list[int]:
        """Keep each wanted fact that can be; one that cannot (too long, a full tenant)
        is logged and left out: the turn that stated it is answered already."""
        kept = []
        for item_scope, text, message_id in wanted:
            if refused := await self.refusal(session, item_scope, text):
                log.warning("not remembered for %s: %s", item_scope, refused)
                continue
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
