"""When a conversation goes to a person: the user asks for one (a keyword rule in English,
Russian and German, applied before any model is called; a real model may also call the
`request_human` tool), the bot found nothing twice in a row, or answers got 👎 twice."""

import re

# A request for a person: a verb of asking or talking near a word for a person.
_PERSON_EN = r"(?:human|person|real person|operator|agent|someone|somebody|staff|support team)"
_ASK_EN = (
    r"(?:talk|speak|chat|connect|transfer|get|need|want)(?:\W+\w+){0,4}?\W+"
    rf"(?:a |an |to a |to an |me to a |with a |with an |me a |)?{_PERSON_EN}\b"
)
_PERSON_RU = r"(?:оператор\w*|человек\w*|сотрудник\w*|специалист\w*|менеджер\w*|живо\w+)"
_ASK_RU = (
    r"(?:позов\w*|позвать|соедин\w*|переключ\w*|хочу|нужен|нужна|можно|дайте|свяж\w*|"
    rf"поговорить|позвоните)(?:\W+\w+){{0,3}}?\W+{_PERSON_RU}"
)
_PERSON_DE = r"(?:mitarbeiter\w*|mensch\w*|menschen|person|berater\w*|support-team|kollege\w*)"
_ASK_DE = (
    rf"\bmit\W+(?:\w+\W+){{0,2}}?{_PERSON_DE}\W+(?:\w+\W+){{0,2}}?(?:sprechen|reden|chatten)\b"
    rf"|\bverbind\w*\W+(?:\w+\W+){{0,5}}?{_PERSON_DE}"
    rf"|\b{_PERSON_DE}\W+(?:\w+\W+){{0,1}}?bitte\b"
)
_ASKS_FOR_PERSON = {
    language: re.compile(pattern, re.IGNORECASE)
    for language, pattern in (("en", _ASK_EN), ("ru", _ASK_RU), ("de", _ASK_DE))
}

# What an answer that found nothing says: the offline model's wording and a real model's
# usual ones (the system prompt asks it to say so plainly).
_FOUND_NOTHING = re.compile(
    r"could not find|couldn't find|can't find|cannot find|did not find|didn't find|"
    r"not (?:covered|in the documentation|mentioned in the)|no information|"
    r"nichts gefunden|nicht gefunden|keine informationen|"
    r"не наш[её]л|не нашла|не удалось найти|нет информации",
    re.IGNORECASE,
)


def person_asked_in(text: str) -> str | None:
    """The language (`en`, `ru`, `de`) in which the user asks to be handed to a person;
    None when they do not."""
    return next((lang for lang, rule in _ASKS_FOR_PERSON.items() if rule.search(text)), None)


def asks_for_person(text: str) -> bool:
    return person_asked_in(text) is not None


FOUND_NOTHING_WITHIN = 160  # characters: said up front, not "if you cannot find the menu…"


def found_nothing(answer: str) -> bool:
    """The answer says, up front, that the documentation had nothing on the question."""
    return bool(_FOUND_NOTHING.search(answer[:FOUND_NOTHING_WITHIN]))
