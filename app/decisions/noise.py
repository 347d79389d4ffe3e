"""Misspelled copies of a message, for fitting the decisions to how users type.

`misspelled(text, seed)` changes a share of the message's words by one slip each — a
keyboard neighbour instead of the letter, a letter dropped, two letters swapped, a letter
typed twice or held down, a diacritic left off — and, for the whole message, may lower-case
it, drop its punctuation and run two words together. Character operations only, no word
list: it works on any alphabet (the keyboard neighbours are known for the Latin QWERTY and
QWERTZ and the Cyrillic ЙЦУКЕН layouts; a letter of another script gets one of the other
slips). Deterministic: the same text, seed and rate give the same copy in every process
(the seed is mixed with the text by SHA-256, not Python's salted `hash`)."""

import hashlib
import random
import unicodedata

# Letter rows of the keyboard layouts whose neighbours are known. Each row sits a quarter
# to half a key right of the one above: a key's neighbours are the keys beside it, the two
# above at its own position and the next, and the two below at the previous and its own.
_LAYOUTS = (
    ("qwertyuiop", "asdfghjkl", "zxcvbnm"),  # QWERTY
    ("qwertzuiopü", "asdfghjklöä", "yxcvbnm"),  # QWERTZ
    ("йцукенгшщзхъ", "фывапролджэ", "ячсмитьбю"),  # ЙЦУКЕН
)
_PUNCTUATION = set(".,;:!?¿¡…'\"()-–—")


def _neighbours() -> dict[str, str]:
    found: dict[str, set[str]] = {}
    for rows in _LAYOUTS:
        for r, row in enumerate(rows):
            for c, key in enumerate(row):
                near = [
                    (r, c - 1),
                    (r, c + 1),
                    (r - 1, c),
                    (r - 1, c + 1),
                    (r + 1, c - 1),
                    (r + 1, c),
                ]
                found.setdefault(key, set()).update(
                    rows[i][j] for i, j in near if 0 <= i < len(rows) and 0 <= j < len(rows[i])
                )
    return {key: "".join(sorted(near)) for key, near in found.items()}


NEIGHBOURS = _neighbours()


def _rng(text: str, seed: int) -> random.Random:
    digest = hashlib.sha256(f"{seed}\0{text}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _slip(word: str, rng: random.Random) -> str:
    """One typing slip in a word of two letters or more."""
    letters = [i for i, ch in enumerate(word) if ch.isalpha()]
    i = rng.choice(letters)
    ch = word[i]
    kind = rng.choice(("neighbour", "drop", "swap", "double", "hold", "bare"))
    if kind == "neighbour" and ch.lower() in NEIGHBOURS:
        new = rng.choice(NEIGHBOURS[ch.lower()])
        return word[:i] + (new.upper() if ch.isupper() else new) + word[i + 1 :]
    if kind == "swap" and i + 1 < len(word) and word[i + 1].isalpha() and word[i + 1] != ch:
        return word[:i] + word[i + 1] + ch + word[i + 2 :]
    if kind == "double":
        return word[:i] + ch + word[i:]
    if kind == "hold":  # "humaaan"
        return word[:i] + ch * rng.randint(2, 3) + word[i:]
    if kind == "bare":  # "ü" typed as "u", "ё" as "е"
        base = unicodedata.normalize("NFD", ch)[0]
        if base != ch:
            return word[:i] + base + word[i + 1 :]
    if len(letters) >= 3:  # "drop", and what could not be done otherwise
        return word[:i] + word[i + 1 :]
    return word[:i] + ch + word[i:]


def misspelled(text: str, seed: int, rate: float = 0.3) -> str:
    """A misspelled copy of `text`: about `rate` of its words (at least one when it has a
    word of two letters) get one slip each; see the module docstring."""
    rng = _rng(text, seed)
    words = text.split(" ")
    slippable = [i for i, w in enumerate(words) if sum(ch.isalpha() for ch in w) >= 2]
    if slippable:
        count = max(1, round(rate * len(slippable)))
        for i in rng.sample(slippable, min(count, len(slippable))):
            words[i] = _slip(words[i], rng)
    if len(words) >= 2 and rng.random() < 0.2:  # two words run together
        j = rng.randrange(len(words) - 1)
        words[j : j + 2] = [words[j] + words[j + 1]]
    noisy = " ".join(words)
    if rng.random() < 0.5:
        noisy = noisy.lower()
    if rng.random() < 0.5:
        noisy = "".join(ch for ch in noisy if ch not in _PUNCTUATION)
    return noisy.strip() or text


def misspelled_copies(text: str, copies: int, seed: int, rate: float = 0.3) -> list[str]:
    """`copies` misspelled copies of `text` (seeds `seed`, `seed + 1`, …)."""
    return [misspelled(text, seed + n, rate) for n in range(copies)]
