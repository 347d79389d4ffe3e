"""A stated fact's kind, and the explicit "remember that …".

A fact's kind is its subject: the words before its first verb from a closed set of
grammatical verbs ("our currency is EUR" → `currency`); when the subject is only a
pronoun, the verb and its object's head word ("we use GnuCash 5.4", "I'm using GnuCash 4"
→ `use gnucash`; "I prefer short answers" → `prefer answers`). A newer fact of the same
kind in the same scope replaces the older one. "We use Windows" and "we use GnuCash" are
different kinds, and so are "I'm on Windows" and "I'm on macOS" (no subject word): both stay.
German and Russian statements get kinds the same way, their verbs counting as the English
ones. Tuned on evals/kinds/calibration.yaml, measured on evals/kinds/heldout.yaml
(`supportbot eval kinds`).
"""

import re

# Grammatical verbs that end a fact's subject, by the English verb they count as (so "wir
# nutzen GnuCash 5" and "we use GnuCash 5" are one kind); contractions are split at the
# apostrophe ("we're" → "we", "re"), so their tails are here too. Russian has no present
# "is": a dash stands for it ("наша валюта — евро"), and so does a "now" where the verb
# would be ("наша компания теперь АО").
_VERBS = {
    # English
    "is": "be", "are": "be", "was": "be", "were": "be", "am": "be", "m": "be", "re": "be",
    "s": "be", "use": "use", "uses": "use", "using": "use", "run": "run", "runs": "run",
    "prefer": "prefer", "prefers": "prefer", "need": "need", "needs": "need",
    "want": "want", "wants": "want", "work": "work", "works": "work",
    # German
    "ist": "be", "sind": "be", "bin": "be", "bist": "be", "war": "be", "waren": "be",
    "nutzen": "use", "nutze": "use", "nutzt": "use", "benutzen": "use", "benutze": "use",
    "benutzt": "use", "verwenden": "use", "verwende": "use", "verwendet": "use",
    "läuft": "run", "laufen": "run", "arbeiten": "work", "arbeite": "work",
    "arbeitet": "work", "brauchen": "need", "brauche": "need", "braucht": "need",
    "benötigen": "need", "benötige": "need", "benötigt": "need", "möchten": "want",
    "möchte": "want", "wollen": "want", "will": "want", "bevorzugen": "prefer",
    "bevorzuge": "prefer", "bevorzugt": "prefer",
    # Russian
    "—": "be", "–": "be", "-": "be", "теперь": "be", "сейчас": "be", "уже": "be",
    "является": "be", "являемся": "be", "являюсь": "be", "есть": "be", "был": "be",
    "была": "be", "было": "be", "были": "be", "находится": "be", "находятся": "be",
    "находимся": "be", "используем": "use", "использую": "use", "использует": "use",
    "используют": "use", "используется": "use", "пользуемся": "use", "пользуюсь": "use",
    "пользуется": "use", "работаем": "work", "работаю": "work", "работает": "work",
    "работают": "work", "нужен": "need", "нужна": "need", "нужно": "need", "нужны": "need",
    "хотим": "want", "хочу": "want", "хочет": "want", "предпочитаю": "prefer",
    "предпочитаем": "prefer", "предпочитает": "prefer",
}  # fmt: skip
# Words that say whose or when, not what: left out of a kind.
_FILLERS = {
    # English
    "i", "we", "you", "they", "he", "she", "it", "my", "our", "your", "their", "his", "her",
    "its", "the", "a", "an", "now", "currently", "still", "also", "always", "usually",
    "only", "on", "in", "with", "for", "to", "of", "at", "all", "please", "and", "ll", "ve",
    "d", "t", "don", "do", "does",
    # German
    "ich", "wir", "du", "sie", "er", "es", "ihr", "man", "mein", "meine", "meinen",
    "meinem", "meiner", "meines", "unser", "unsere", "unseren", "unserem", "unserer",
    "unseres", "der", "die", "das", "den", "dem", "des", "ein", "eine", "einen", "einem",
    "einer", "eines", "jetzt", "nun", "derzeit", "aktuell", "zurzeit", "noch", "auch",
    "immer", "meistens", "nur", "schon", "inzwischen", "mittlerweile", "gerade", "auf",
    "im", "mit", "für", "zu", "zum", "zur", "von", "vom", "bei", "beim", "unter",
    "über", "bitte", "und", "nicht", "kein", "keine",
    # Russian
    "я", "мы", "ты", "вы", "он", "она", "оно", "они", "мне", "нам", "меня", "нас", "у",
    "наш", "наша", "наше", "наши", "нашей", "нашу", "нашего", "нашем", "нашим", "мой",
    "моя", "моё", "мое", "мои", "моей", "мою", "моего", "в", "во", "на", "с", "со", "для",
    "по", "к", "о", "об", "из", "от", "и", "а", "но", "не", "пожалуйста", "всё", "все",
    "всегда", "обычно", "только", "тоже", "также", "ещё", "еще",
}  # fmt: skip
# A time phrase before an object ("seit Januar mit GnuCash 5"): it and its next word are
# left out of the object's head.
_SINCE = {"since", "seit", "ab"}
# Words, and a dash standing alone (the Russian "is").
_WORD = re.compile(r"[^\W_]+|(?<!\S)[—–-](?!\S)")
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
    ("short answers with …" → answers, "GnuCash 5.4" → gnucash), a time phrase left out
    ("seit Januar mit GnuCash 5" → gnucash)."""
    run: list[str] = []
    skip = False
    for word in words:
        if skip or word in _SINCE:
            skip = word in _SINCE
            continue
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
