"""MessageDecider: the intent and language of a user's message, and what the service does
with them. The handoff asks it before the model (`hands_over`, `gives_bot_back`); the
offline model for small talk and the language of its replies."""

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from app.decisions.intent import (
    BOT,
    FITTED,
    SMALLTALK,
    Intent,
    IntentClassifier,
    load_examples,
)
from app.settings import DecisionSettings
from knowledge.embeddings import Vectors, get_embedder
from knowledge.graph_cache import GraphCache, default_cache_folder
from knowledge.language import LanguageGuess, identify

# Where one clause of a message ends and another starts.
_CLAUSE_BREAK = re.compile(r"[.,;:!?¿¡…\n]+|\s[-–—]\s")
# Where one sentence ends and the next starts.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?…])\s+|\n+")


@dataclass(frozen=True)
class Decision:
    intent: str  # question | person | smalltalk | bot (app.decisions.intent)
    confidence: float  # the intent's probability
    language: str  # ISO 639-1
    language_confidence: float
    person_clause: float = 0.0  # the likeliest request for a person among its clauses
    person: float = 0.0  # that a person is asked for at all (the person head)
    person_closing: float = 0.0  # the likeliest among a long message's closing sentences


class MessageDecider:
    def __init__(self, settings: DecisionSettings, classifier: IntentClassifier) -> None:
        self.settings = settings
        self.classifier = classifier

    def decide(self, text: str, vector: Vectors | None = None) -> Decision:
        intent = self.classifier.classify(text, vector)
        return self.decision(text, intent, self.classifier.person_probability)

    def decision(self, text: str, intent: Intent, read_person: Callable[[str], float]) -> Decision:
        """The decision on `text` read as `intent`, its clauses by `read_person` (the
        service's person head, or a cross-validation fold's)."""
        guess = self.language(text)
        settings = self.settings
        person_clause = person_in_clauses(
            text,
            intent.person,
            read_person,
            self.sure_of_person,
            settings.person_clause_min_words,
            settings.person_clause_gate,
        )
        person_closing = 0.0
        if intent.person < self.sure_of_person:
            person_closing = person_in_closing(
                text,
                read_person,
                settings.person_clause_min_words,
                settings.person_closing_from_chars,
            )
        return Decision(
            intent.label,
            intent.confidence,
            guess.language,
            guess.confidence,
            person_clause,
            intent.person,
            person_closing,
        )

    @property
    def sure_of_person(self) -> float:
        """Above this a message hands over as a whole with either model."""
        return max(self.settings.person_confidence, self.settings.person_confidence_before_model)

    def language(self, text: str) -> LanguageGuess:
        expected = self.settings.expected_languages
        return identify(text, expected, expected[0] if expected else "en")

    def person_threshold(self, *, model_decides: bool) -> float:
        """How sure a request for a person must be to skip the model: with a real model
        only an unambiguous one (the model has `request_human` for the rest)."""
        return (
            self.settings.person_confidence_before_model
            if model_decides
            else self.settings.person_confidence
        )

    def hands_over(self, decision: Decision, *, model_decides: bool) -> bool:
        """Open a handoff before any model (see `person_threshold`): the message asks for
        a person (the person head: outside a handoff, refusing the bot asks for one), one
        of its clauses does beyond doubt, or a long message's closing sentences do."""
        needed = self.person_threshold(model_decides=model_decides)
        return (
            decision.person >= needed
            or decision.person_clause >= max(needed, self.settings.person_clause_confidence)
            or decision.person_closing >= max(needed, self.settings.person_closing_confidence)
        )

    def is_smalltalk(
        self, decision: Decision, text: str, read: Callable[[str], str] | None = None
    ) -> bool:
        """Small talk asks nothing in any part: "Thanks, but it still fails" reads as
        thanks as a whole, its second clause as a problem. A problem answered with a
        pleasantry costs more than a greeting that gets searched, so every clause of
        two words or more must read as small talk too ("Danke, aber klappt immer noch
        nicht": its one clause of two words or more is read too). `read`: a clause's
        intent (by default the classifier's; cross-validation passes a fold's fit)."""
        if decision.intent != SMALLTALK or decision.confidence < self.settings.smalltalk_confidence:
            return False
        label = read or (lambda part: self.classifier.classify(part).label)
        return all(label(part) == SMALLTALK for part in pieces(text))

    def gives_bot_back(self, decision: Decision) -> bool:
        return (
            decision.intent == BOT and decision.confidence >= self.settings.back_to_bot_confidence
        )


def clauses(text: str, min_words: int = 2) -> list[str]:
    """The message's clauses of `min_words` words or more, when it has more than one."""
    parts = [c.strip() for c in _CLAUSE_BREAK.split(text) if len(c.split()) >= min_words]
    return parts if len(parts) >= 2 else []


def pieces(text: str) -> list[str]:
    """The message's clauses of two words or more, when it has more than one clause of
    any length ("Danke, aber klappt immer noch nicht": the second)."""
    parts = [c.strip() for c in _CLAUSE_BREAK.split(text) if c.strip()]
    return [c for c in parts if len(c.split()) >= 2] if len(parts) >= 2 else []


def closing_sentences(text: str, min_words: int = 4) -> list[str]:
    """The last two sentences of a message (of `min_words` words or more), each alone and
    both together: where a long problem report puts what it wants done, the request alone
    when a shorter sentence or a sign-off follows it ("… Please pass this on to someone who
    can look at my data. No rush, it can wait until Monday. Thanks so much!")."""
    sentences = [s.strip() for s in _SENTENCE_BREAK.split(text) if len(s.split()) >= min_words]
    return list(dict.fromkeys([" ".join(sentences[-2:]), *sentences[-2:]])) if sentences else []


def person_in_clauses(
    text: str,
    person: float,
    read: Callable[[str], float],
    sure: float = 1.0,
    min_words: int = 2,
    gate: float = 0.0,
) -> float:
    """The likeliest request for a person among the clauses of a message, by `read` (the
    person head); 0 when the whole asks for a person with probability `person` at least
    `sure` (it hands over as a whole) or below `gate` (a clause is then the message's way
    of asking a question)."""
    if person >= sure or person < gate:
        return 0.0
    return max((read(clause) for clause in clauses(text, min_words)), default=0.0)


def person_in_closing(
    text: str, read: Callable[[str], float], min_words: int = 4, closing_from: int = 0
) -> float:
    """The likeliest request for a person among the closing sentences of a message of
    `closing_from` characters or more (0: none), by `read`, whatever the whole reads as:
    the whole of a long problem report reads as the problem, its closing sentences as what
    it asks for ("… Can someone from your team call me? I'm free after 2pm.")."""
    if not closing_from or len(text) < closing_from:
        return 0.0
    return max((read(part) for part in closing_sentences(text, min_words)), default=0.0)


@cache
def decider_for(
    embedder: str, settings: DecisionSettings, cache_folder: Path | None = None
) -> MessageDecider:
    """One decider per embedder and settings in a process (fitted once; the examples'
    vectors kept in `cache_folder`, by default the user's cache folder)."""
    folder = cache_folder or default_cache_folder()
    classifier = IntentClassifier(
        get_embedder(embedder, folder),
        load_examples(),
        GraphCache(folder),
        noisy_copies=settings.noisy_copies,
        person_example_files=settings.person_examples,
        fitted=FITTED,
    )
    return MessageDecider(settings, classifier)


def write_shipped_fit(embedder: str, settings: DecisionSettings) -> int:
    """Fit the decider on its examples and labelled messages and write the fit where the
    package ships it (`FITTED`, checked by fingerprint at start-up); how many labelled
    messages it was fitted on."""
    classifier = decider_for(embedder, settings).classifier
    classifier.fit().save(FITTED, classifier.model_fingerprint)
    return len(classifier.person_examples)
