"""The words the eval metrics compare facts and answers by: lowercase words of three
letters or more, without the function words of English, German and Russian listed here.
Kept apart from any word list of the models the metrics grade, so that a model cannot
score by sharing the metric's idea of what a word is."""

import re

_WORD = re.compile(r"[^\W\d_]{3,}|\d+[.,]?\d*", re.UNICODE)
# fmt: off
_FUNCTION_WORDS = frozenset({
    # English
    "the", "and", "for", "but", "nor", "not", "yet", "you", "your", "our", "out", "are",
    "was", "were", "been", "being", "has", "have", "had", "does", "did", "doing", "can",
    "could", "would", "should", "will", "shall", "may", "might", "must", "this", "that",
    "these", "those", "there", "here", "then", "than", "them", "they", "their", "his",
    "her", "its", "who", "whom", "what", "which", "when", "where", "why", "how", "with",
    "into", "onto", "from", "about", "also", "just", "only", "some", "any", "all", "each",
    "every", "very", "too", "off", "over", "under", "again", "once", "such", "own",
    # German
    "der", "die", "das", "den", "dem", "des", "ein", "eine", "einen", "einem", "einer",
    "und", "oder", "aber", "nicht", "ist", "sind", "war", "wird", "werden", "kann",
    "können", "muss", "mit", "für", "auf", "aus", "bei", "von", "zum", "zur", "ich",
    "sie", "wir", "ihr", "wie", "wo", "wann", "warum", "welche", "welcher", "auch",
    "noch", "nur", "schon", "sich", "dass",
    # Russian
    "как", "что", "это", "где", "когда", "почему", "или", "для", "при", "так", "все",
    "его", "она", "они", "мне", "меня", "вам", "вас", "нас", "уже", "ещё", "еще", "только",
    "если", "чтобы", "есть", "был", "была", "было", "нет", "над", "под", "без",
})
# fmt: on


def fact_words(text: str) -> list[str]:
    """The text's words that carry meaning, lowercase, in order, once each."""
    words = (word.lower() for word in _WORD.findall(text))
    return list(dict.fromkeys(w for w in words if w not in _FUNCTION_WORDS))
