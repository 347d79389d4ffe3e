"""What to search for when a message refers to an earlier one.

"and for ATM withdrawals?" names no topic of its own: the question before it does. A
message that looks like such a follow-up (it opens with a connective, or is short and
points back with a pronoun) is searched together with the content words of the previous
question. Used by the offline model and measured by `supportbot kb bench` on the dev
conversations (turn text, this, and the gold "refers to" context).
"""

import re

_WORD = re.compile(r"\w+", re.UNICODE)
# fmt: off
# Openers of a message that continues the previous one.
_CONNECTIVES = (
    "and", "also", "but", "or", "so", "then", "what about", "what if", "how about",
    "same", "und", "aber", "auch", "oder", "was ist mit", "was wenn", "und wenn",
    "а", "и", "но", "или", "а если", "а что", "ещё", "еще", "тоже",
)
# Words that point back to something named earlier.
_REFERRING = frozenset({
    "it", "its", "this", "that", "those", "these", "them", "they", "their", "there", "one",
    "es", "das", "dies", "diese", "dieser", "dort", "ihn", "ihm", "sie", "davon", "dafür",
    "это", "этот", "эта", "его", "её", "ее", "их", "там", "он", "она", "они", "него",
})
# Words that say nothing about a topic: left out of the topic carried over.
_FILLER = frozenset({
    "the", "and", "for", "are", "but", "not", "you", "your", "our", "out", "can", "how",
    "what", "when", "where", "which", "who", "why", "with", "this", "that", "these", "those",
    "there", "then", "them", "they", "have", "has", "had", "does", "did", "was", "were",
    "will", "would", "should", "could", "into", "from", "about", "also", "just", "only",
    "some", "any", "all", "its", "don", "isn", "doesn", "didn", "aren", "won", "please",
    "thanks", "we", "do", "is", "in",
    "to", "of", "on", "it", "my", "me", "an", "or", "so", "be", "if", "at",
})
# fmt: on
_SHORT = 12  # words: a longer message usually says what it is about


def looks_like_followup(text: str) -> bool:
    lowered = text.strip().lower()
    words = _WORD.findall(lowered)
    if not words:
        return False
    if any(re.match(rf"{re.escape(opener)}(?!\w)", lowered) for opener in _CONNECTIVES):
        return True
    return len(words) <= _SHORT and bool(set(words) & _REFERRING)


def topic_words(text: str) -> list[str]:
    """The content words of a message, in order, once each."""
    words = [word.lower() for word in _WORD.findall(text) if len(word) > 2]
    return list(dict.fromkeys(word for word in words if word not in _FILLER))


def contextual_query(text: str, previous: str | None) -> str:
    """`text`, prefixed with the previous question's topic when it looks like a follow-up."""
    if not previous or not looks_like_followup(text):
        return text
    return f"{' '.join(topic_words(previous))} {text}".strip()
