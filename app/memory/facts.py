"""A stated fact's kind, and the explicit "remember that …".

A fact's kind is its subject: the words before its first verb from a closed set of
grammatical verbs ("our currency is EUR" → `currency`); when the subject is only a
pronoun, the verb and its object's head word ("we use GnuCash 5.4", "I'm using GnuCash 4"
→ `use gnucash`; "I prefer short answers" → `prefer answers`). A newer fact of the same
kind in the same scope replaces the older one. "We use Windows" and "we use GnuCash" are
different kinds, and so are "I'm on Windows" and "I'm on macOS" (no subject word): both stay.
"""

import re

# Grammatical verbs that end a fact's subject; contractions are split at the apostrophe
# ("we're" → "we", "re"), so their tails are here too.
_VERBS = {
    "is": "be", "are": "be", "was": "be", "were": "be", "am": "be", "m": "be", "re": "be",
    "s": "be", "use": "use", "uses": "use", "using": "use", "run": "run", "runs": "run",
    "prefer": "prefer", "prefers": "prefer", "need": "need", "needs": "need",
    "want": "want", "wants": "want", "work": "work", "works": "work",
}  # fmt: skip
# Words that say whose or when, not what: left out of a kind.
_FILLERS = {
    "i", "we", "you", "they", "he", "she", "it", "my", "our", "your", "their", "his", "her",
    "its", "the", "a", "an", "now", "currently", "still", "also", "always", "usually",
    "only", "on", "in", "with", "for", "to", "of", "at", "all", "please", "and", "ll", "ve",
    "d", "t", "don", "do", "does",
}  # fmt: skip
_WORD = re.compile(r"[^\W_]+")
_REMEMBER = re.compile(
    r"^\s*(?:please\s+)?remember(?:\s+that)?\s*[:,]?\s+(?P<fact>\S.*)$", re.I | re.S
)
KIND_WORDS = 3


def kind_of(fact: str) -> str:
    words = _WORD.findall(fact.lower())
    for position, word in enumerate(words):
        if word not in _VERBS:
            continue
        subject = [w for w in words[:position] if w not in _FILLERS]
        if subject:
            return " ".join(subject[-KIND_WORDS:])
        rest = words[position:]
        while len(rest) > 1 and rest[1] in _VERBS:  # "I'm using" → use
            rest = rest[1:]
        return " ".join([_VERBS[rest[0]], *_head(rest[1:])])
    return " ".join([w for w in words if w not in _FILLERS][:KIND_WORDS])


def _head(words: list[str]) -> list[str]:
    """The object's head word: the last of its first words up to a filler or a number
    ("short answers with …" → answers, "GnuCash 5.4" → gnucash)."""
    run: list[str] = []
    for word in words:
        if word in _FILLERS or word.isdigit():
            if run:
                break
            continue
        run.append(word)
    return run[-1:]


def remembered(message: str) -> str | None:
    """The fact of an explicit "remember that …" message; None for any other message."""
    match = _REMEMBER.match(message)
    return " ".join(match["fact"].split()).rstrip(".") if match else None
