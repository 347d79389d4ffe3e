"""Whether a passage holds what a question asks, beyond being near it.

A dense similarity says a passage is about the question's topic; it does not say the
passage answers it ("do you support payroll in Brazil?" comes near a page about users and
roles; "how do I record a partial payment?" nearest to the page whose first section
records a full one). When the question and the passage are in one language, the passage
must contain the question's content words (of the sentences that ask, when it has
context before them): each word stemmed with its language's Snowball
stemmer (PyStemmer), stop words (bm25s's lists) left out, and at least `MIN_COVERAGE` of
them found among the passage's stems (its title and heading included); every one of them
(`QUOTE_COVERAGE`) for a model that quotes a passage without reading it (the offline
model): two thirds of a user's own words are shared by the right section and its
neighbours alike. A question in another language than the passage cannot be read so,
and a similarity across languages ranks the right section first too rarely to quote it:
such a passage is offered as possibly related, never quoted as the answer (a real model
searches in the documentation's language, as the search tool asks it to). A support
team's answer (`knowledge.team_answers`) is the exception: a passage per wording of a
question, with its answer, so its nearness is the question's own in any language, and a
paraphrase shares few of its words: it is quoted when it passed the threshold of the
question's language and leads every other page (`leads`), never judged by its words.
"""

import re
from dataclasses import dataclass
from functools import cache

import bm25s.stopwords as stopword_lists
import Stemmer

from knowledge.team_answers import is_team_answer
from knowledge.types import Passage

# The share of a question's content words a passage in its language must contain, and how
# far (in fused search score) a passage must lead the best passage of any other page to be
# quoted as the answer (a near tie between pages is a guess). Chosen on the GnuCash
# manuals' development questions and the first held-out sets of three corpora, replaying
# each question's search under each choice (docs/knowledge.md#your-documentation).
MIN_COVERAGE = 2 / 3
LEAD = 0.02
# For the offline model, chosen on the same sets: at two thirds it quoted a wrong section
# or page for 13 of their 255 answerable questions and the right one for 19; with every
# word, 3 and 5 (the rest offered as pages: docs/knowledge.md#your-documentation).
QUOTE_COVERAGE = 1.0

_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?…])\s+|\n+")
_LANGUAGES = {
    "da": ("danish", "STOPWORDS_DANISH"),
    "de": ("german", "STOPWORDS_GERMAN"),
    "en": ("english", "STOPWORDS_EN_PLUS"),
    "es": ("spanish", "STOPWORDS_SPANISH"),
    "fr": ("french", "STOPWORDS_FRENCH"),
    "it": ("italian", "STOPWORDS_ITALIAN"),
    "nl": ("dutch", "STOPWORDS_DUTCH"),
    "no": ("norwegian", "STOPWORDS_NORWEGIAN"),
    "pt": ("portuguese", "STOPWORDS_PORTUGUESE"),
    "ru": ("russian", "STOPWORDS_RUSSIAN"),
    "sv": ("swedish", "STOPWORDS_SWEDISH"),
    "tr": ("turkish", "STOPWORDS_TURKISH"),
}


@dataclass(frozen=True)
class _Reader:
    stemmer: "Stemmer.Stemmer | None"
    stopwords: frozenset[str]

    def stems(self, text: str) -> set[str]:
        words = [w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in self.stopwords]
        if self.stemmer is None:
            return set(words)
        return set(self.stemmer.stemWords(words))


@cache
def _reader(language: str) -> _Reader:
    names = _LANGUAGES.get(language)
    if names is None:
        return _Reader(None, frozenset())
    stemmer, stopwords = names
    return _Reader(Stemmer.Stemmer(stemmer), frozenset(getattr(stopword_lists, stopwords)))


def content_stems(text: str, language: str) -> set[str]:
    """The text's content words, stemmed, in `language`."""
    return _reader(language).stems(text)


def coverage(question: str, passage: Passage, language: str) -> float:
    """The share of the question's content words (in `language`, the passage's too) that
    the passage contains; 1.0 for a question with none."""
    asked = content_stems(question, language)
    if not asked:
        return 1.0
    held = content_stems(f"{passage.title} {passage.heading} {passage.text}", language)
    return len(asked & held) / len(asked)


def asked_part(question: str, language: str) -> str:
    """What a message asks: its sentences that end in a question mark, when they carry two
    content words or more ("We bill in EUR. How do I create an invoice?"), else all of it
    (the context before a question is not what the passage must hold)."""
    part = " ".join(s for s in _SENTENCE_BREAK.split(question) if s.strip().endswith("?"))
    return part if len(content_stems(part, language)) >= 2 else question


def holds(
    question: str,
    question_language: str,
    passage: Passage,
    passage_language: str,
    min_coverage: float = MIN_COVERAGE,
) -> bool:
    """Whether the passage holds `min_coverage` of what the question asks, as far as words
    can tell (see the module docstring); never known for a question in another language
    than the passage; a team answer's passage is judged by its nearness and lead alone."""
    if is_team_answer(passage.source):
        return True
    if question_language != passage_language:
        return False
    asked = asked_part(question, question_language)
    return coverage(asked, passage, question_language) >= min_coverage


def leads(passage: Passage, found: list[Passage]) -> bool:
    """Whether `passage` is ahead of every passage of another page by `LEAD` (always, from
    a retriever that gives no scores: 0.0)."""
    others = [p.score for p in found if p.source != passage.source]
    return not others or not passage.score or passage.score - max(others) >= LEAD
