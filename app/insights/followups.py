"""Answers that failed, read from what the customer wrote next: a 👎 is not the only way
people say an answer did not help. An answered turn (`answered`, `expert`) is unresolved
when the next question of the same person in the conversation

- says the answer failed (`said_wrong`): a logistic regression over the follow-up's e5
  query vector, fitted to `follow_up_examples.yaml` beside this module ("that didn't
  work", "not what I asked", "такой кнопки нет" against thanks, details and next
  questions), gives it at least `WRONG_PROBABILITY`; or
- asks the same again in other words (`asked_again`): its e5 query vector is at least
  `AGAIN_SIMILARITY` cosine to the answered question's.

Both thresholds were chosen on a labelled calibration set of follow-ups and are reported on
a held-out one (`supportbot eval follow-ups`, docs/insights.md). The regression is fitted
when first used (the examples' vectors are kept in the model cache)."""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from threading import Lock

import numpy as np
from sqlalchemy import ColumnElement, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Conversation, Message, Turn
from knowledge.embeddings import Embedder, Vectors, query_vectors
from knowledge.graph_cache import GraphCache
from knowledge.regression import SoftmaxRegression
from knowledge.yaml_files import read_yaml

EXAMPLES = Path(__file__).with_name("follow_up_examples.yaml")
ANSWERED = ("answered", "expert")
SAID_WRONG = "said_wrong"
ASKED_AGAIN = "asked_again"
# Chosen on evals/insights/followups_calibration.yaml (`supportbot eval follow-ups
# --sweep`): of the grid, the pair that catches the most failed answers while marking at
# most 5% of its `other` follow-ups (thanks, details, related next questions): 67 of 90,
# 2 of 60 (0.1 and 0.2 gave the same; the higher is kept).
WRONG_PROBABILITY = 0.2
AGAIN_SIMILARITY = 0.89


@dataclass(frozen=True)
class FollowUp:
    """An answered turn's question and the same person's next question."""

    conversation_id: int
    turn: int
    question: str
    follow_up: str


class FollowUpReader:
    """Tells which follow-ups say the answer before them failed (see the module docstring)."""

    def __init__(
        self,
        embedder: Embedder,
        cache: GraphCache | None = None,
        wrong_probability: float = WRONG_PROBABILITY,
        again_similarity: float = AGAIN_SIMILARITY,
    ) -> None:
        self.embedder = embedder
        self.wrong_probability = wrong_probability
        self.again_similarity = again_similarity
        self._cache = cache
        self._model: SoftmaxRegression | None = None
        self._lock = Lock()

    def _regression(self) -> SoftmaxRegression:
        with self._lock:
            if self._model is None:
                texts, labels = examples()
                digest = hashlib.sha256(
                    "\0".join([self.embedder.name, *texts]).encode()
                ).hexdigest()[:16]
                vectors = query_vectors(
                    self.embedder, texts, self._cache, "follow-up-examples", digest
                )
                self._model = SoftmaxRegression.fitted(vectors, labels)
            return self._model

    def _vectors(self, texts: Sequence[str]) -> Vectors:
        return np.stack([self.embedder.embed_query(text) for text in texts])

    def wrong_probabilities(self, follow_ups: Sequence[str]) -> list[float]:
        """How likely each follow-up says the answer before it failed."""
        if not follow_ups:
            return []
        model = self._regression()
        column = model.classes.index("wrong")
        return model.predict_many(self._vectors(follow_ups))[:, column].tolist()

    def similarities(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The cosine of each question and its follow-up (e5 vectors are unit length)."""
        if not pairs:
            return []
        first = self._vectors([question for question, _ in pairs])
        second = self._vectors([follow_up for _, follow_up in pairs])
        return (first * second).sum(axis=1).tolist()

    def verdicts(self, pairs: Sequence[tuple[str, str]]) -> list[str | None]:
        """For each (question, follow-up): `said_wrong`, `asked_again` or None (not failed)."""
        wrong = self.wrong_probabilities([follow_up for _, follow_up in pairs])
        again = self.similarities(pairs)
        return [
            SAID_WRONG
            if p >= self.wrong_probability
            else ASKED_AGAIN
            if s >= self.again_similarity
            else None
            for p, s in zip(wrong, again, strict=True)
        ]


def examples() -> tuple[list[str], list[str]]:
    """The shipped examples' texts and labels (`wrong` or `other`)."""
    texts: list[str] = []
    labels: list[str] = []
    for label, by_language in read_yaml(EXAMPLES).items():
        for messages in by_language.values():
            texts += messages
            labels += [label] * len(messages)
    return texts, labels


async def load_follow_ups(
    session: AsyncSession, since: datetime, until: datetime, tenant: ColumnElement[bool]
) -> list[FollowUp]:
    """The period's answered turns (in the conversations `tenant`, a `where` clause, lets
    the caller see) that the same person followed with another question in the
    conversation, each with that next question."""
    answered = {
        (row.conversation_id, row.number)
        for row in await session.execute(
            select(Turn.conversation_id, Turn.number)
            .join(Conversation, Conversation.id == Turn.conversation_id)
            .where(
                Turn.started_at >= since,
                Turn.started_at < until,
                Turn.outcome.in_(ANSWERED),
                tenant,
            )
        )
    }
    if not answered:
        return []
    messages = await session.execute(
        select(Message.conversation_id, Message.turn, Message.author, Message.content)
        .where(
            Message.conversation_id.in_({conversation for conversation, _ in answered}),
            Message.role == "user",
        )
        .order_by(Message.conversation_id, Message.seq)
    )
    follow_ups: list[FollowUp] = []
    # Per conversation and author: the answered question still waiting for its follow-up.
    waiting: dict[tuple[int, str | None], tuple[int, str]] = {}
    seen_turns: set[tuple[int, int]] = set()
    for message in messages:
        where = (message.conversation_id, message.turn)
        if where in seen_turns:
            continue  # a turn's first user message is its question
        seen_turns.add(where)
        asker = (message.conversation_id, message.author)
        if asker in waiting:
            turn, question = waiting.pop(asker)
            follow_ups.append(FollowUp(message.conversation_id, turn, question, message.content))
        if where in answered:
            waiting[asker] = (message.turn, message.content)
    return follow_ups


def unresolved_turns(
    reader: FollowUpReader, follow_ups: Sequence[FollowUp]
) -> dict[tuple[int, int], str]:
    """(conversation id, turn) of each answer its follow-up says failed, with how it said
    so. CPU-bound (embedding): run it off the event loop."""
    if not follow_ups:
        return {}
    verdicts = reader.verdicts([(item.question, item.follow_up) for item in follow_ups])
    return {
        (item.conversation_id, item.turn): verdict
        for item, verdict in zip(follow_ups, verdicts, strict=True)
        if verdict is not None
    }
