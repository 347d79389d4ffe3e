"""MessageDecider: the intent and language of a user's message, and what the service does
with them. The handoff asks it before the model (`hands_over`, `gives_bot_back`); the
offline model for small talk and the language of its replies."""

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from app.decisions.intent import BOT, PERSON, SMALLTALK, IntentClassifier, load_examples
from app.settings import DecisionSettings
from knowledge.embeddings import Vectors, get_embedder
from knowledge.graph_cache import GraphCache, default_cache_folder
from knowledge.language import LanguageGuess, identify

# Where one clause of a message ends and another starts.
_CLAUSE_BREAK = re.compile(r"[.,;:!?¿¡…\n]+|\s[-–—]\s")


@dataclass(frozen=True)
class Decision:
    intent: str  # question | person | smalltalk | bot (app.decisions.intent)
    confidence: float  # the intent's probability
    language: str  # ISO 639-1
    language_confidence: float


class MessageDecider:
    def __init__(self, settings: DecisionSettings, classifier: IntentClassifier) -> None:
        self.settings = settings
        self.classifier = classifier

    def decide(self, text: str, vector: Vectors | None = None) -> Decision:
        intent = self.classifier.classify(text, vector)
        guess = self.language(text)
        return Decision(intent.label, intent.confidence, guess.language, guess.confidence)

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
        """Open a handoff before any model (see `person_threshold`)."""
        needed = self.person_threshold(model_decides=model_decides)
        return decision.intent == PERSON and decision.confidence >= needed

    def is_smalltalk(self, decision: Decision, text: str) -> bool:
        """Small talk asks nothing in any part: "Thanks, but it still fails" reads as
        thanks as a whole, its second clause as a problem. A problem answered with a
        pleasantry costs more than a greeting that gets searched, so every clause of
        two words or more must read as small talk too."""
        if decision.intent != SMALLTALK or decision.confidence < self.settings.smalltalk_confidence:
            return False
        clauses = [c for c in _CLAUSE_BREAK.split(text) if len(c.split()) >= 2]
        return len(clauses) < 2 or all(
            self.classifier.classify(clause).label == SMALLTALK for clause in clauses
        )

    def gives_bot_back(self, decision: Decision) -> bool:
        return (
            decision.intent == BOT and decision.confidence >= self.settings.back_to_bot_confidence
        )


@cache
def decider_for(
    embedder: str, settings: DecisionSettings, cache_folder: Path | None = None
) -> MessageDecider:
    """One decider per embedder and settings in a process (fitted once; the examples'
    vectors kept in `cache_folder`, by default the user's cache folder)."""
    folder = cache_folder or default_cache_folder()
    classifier = IntentClassifier(
        get_embedder(embedder, folder), load_examples(), GraphCache(folder)
    )
    return MessageDecider(settings, classifier)
