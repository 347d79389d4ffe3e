"""The support team's answers: stored in the `answers` table and, while enabled, indexed
into their collection as the document `answers/<id>` (knowledge/team_answers.py). Every
change is indexed before it is committed, so what the table says is what the bot finds:
an edit re-indexes at once, disabling or deleting takes the answer out."""

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.answers.drafts import Draft, from_staff_reply
from app.db.models import Answer
from knowledge import team_answers
from knowledge.language import identify
from knowledge.loaders import KNOWN_LANGUAGES
from knowledge.settings import KnowledgeSettings
from knowledge.store import KnowledgeBase


@dataclass(frozen=True)
class AnswerDraft:
    """What a staff member writes; `languages` empty: read from the text; `collection`
    None: the configured one."""

    question: str
    answer: str
    variants: Sequence[str] = ()
    languages: Sequence[str] = ()
    enabled: bool = True
    collection: str | None = None
    author: str | None = None


def wordings(variants: Sequence[str], question: str) -> list[str]:
    """The other wordings, each once, blank ones and the question itself left out."""
    seen = {" ".join(question.split()).casefold()}
    kept: list[str] = []
    for variant in variants:
        line = " ".join(variant.split())
        if line and line.casefold() not in seen:
            seen.add(line.casefold())
            kept.append(line)
    return kept


class AnswerService:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        knowledge: KnowledgeBase,
        *,
        collection: str,
        language: str = "en",
    ) -> None:
        """`collection`: where an answer goes that names none; `language`: the
        documentation's, what a text too short to tell is taken for."""
        self._sessions = sessions
        self._knowledge = knowledge
        self._collection = collection
        self._language = language

    @classmethod
    def configured(
        cls,
        sessions: async_sessionmaker[AsyncSession],
        knowledge: KnowledgeBase,
        settings: KnowledgeSettings,
    ) -> "AnswerService":
        """Over the configured collection and documentation language."""
        return cls(sessions, knowledge, collection=settings.collection, language=settings.language)

    async def listed(
        self, collection: str | None = None, enabled: bool | None = None
    ) -> list[Answer]:
        """The answers, the newest first."""
        query = select(Answer).order_by(Answer.id.desc())
        if collection is not None:
            query = query.where(Answer.collection == collection)
        if enabled is not None:
            query = query.where(Answer.enabled == enabled)
        async with self._sessions() as session:
            return list(await session.scalars(query))

    async def get(self, answer_id: int) -> Answer | None:
        async with self._sessions() as session:
            return await session.get(Answer, answer_id)

    async def drafted(self, staff_message_id: int) -> Draft | None:
        """A staff reply of a transcript as an answer, with the customer's question before
        it (app/answers/drafts.py); None when it is no staff message."""
        async with self._sessions() as session:
            return await from_staff_reply(session, staff_message_id)

    async def create(self, draft: AnswerDraft) -> Answer:
        row = Answer(
            question=draft.question.strip(),
            variants=wordings(draft.variants, draft.question),
            answer=draft.answer.strip(),
            author=draft.author,
            languages=self._languages(draft.languages, draft.question, draft.answer),
            enabled=draft.enabled,
            collection=draft.collection or self._collection,
        )
        async with self._sessions() as session:
            session.add(row)
            await session.flush()
            await self._index(row)
            await session.commit()
        return row

    async def save(self, draft: AnswerDraft) -> bool:
        """Add the draft, or update the answer its collection has for the same question
        (an import): True when it was added."""
        collection = draft.collection or self._collection
        async with self._sessions() as session:
            same = await session.scalar(
                select(Answer.id).where(
                    Answer.collection == collection, Answer.question == draft.question.strip()
                )
            )
        if same is None:
            await self.create(draft)
            return True
        changes = {
            "answer": draft.answer,
            "variants": list(draft.variants),
            "languages": list(draft.languages),
            "enabled": draft.enabled,
        }
        await self.update(same, changes)
        return False

    async def update(self, answer_id: int, changes: dict[str, Any]) -> Answer | None:
        """Set `changes` (question, variants, answer, languages, enabled, collection);
        the answer is indexed again, moved, or taken out as they say."""
        async with self._sessions() as session:
            row = await session.get(Answer, answer_id)
            if row is None:
                return None
            before = row.collection
            for name, value in changes.items():
                setattr(row, name, value.strip() if isinstance(value, str) else value)
            row.variants = wordings(row.variants, row.question)
            if "languages" in changes or {"question", "answer"} & changes.keys():
                row.languages = self._languages(
                    changes.get("languages", ()), row.question, row.answer
                )
            await session.flush()  # updated_at, the citation's date
            await session.refresh(row)
            if before != row.collection:
                await asyncio.to_thread(team_answers.unindex, self._knowledge, row.id, before)
            await self._index(row)
            await session.commit()
        return row

    async def delete(self, answer_id: int) -> bool:
        async with self._sessions() as session:
            row = await session.get(Answer, answer_id)
            if row is None:
                return False
            await asyncio.to_thread(team_answers.unindex, self._knowledge, row.id, row.collection)
            await session.delete(row)
            await session.commit()
        return True

    async def _index(self, row: Answer) -> None:
        if not row.enabled:
            await asyncio.to_thread(team_answers.unindex, self._knowledge, row.id, row.collection)
            return
        document = team_answers.TeamAnswer(
            id=row.id,
            question=row.question,
            variants=row.variants,
            answer=row.answer,
            language=row.languages[0] if row.languages else "",
            updated=row.updated_at.date(),
        )
        await asyncio.to_thread(team_answers.index, self._knowledge, document, row.collection)

    def _languages(self, given: Sequence[str], question: str, answer: str) -> list[str]:
        """The languages given (known codes, each once), else the answer's, read."""
        codes = [c.strip().lower() for c in given if c.strip().lower() in KNOWN_LANGUAGES]
        if codes:
            return list(dict.fromkeys(codes))
        guess = identify(f"{question}\n{answer}", (self._language,), self._language)
        return [guess.language] if guess.language in KNOWN_LANGUAGES else []
