"""What the client is told, in their language (English where there is no wording for it):
a person takes over (and when), the bot answers again once the person is done, or at once
when the client did not want a person after all."""

from datetime import datetime

_TAKEOVER = {
    "en": "I am handing this conversation to a person from our support team; {when}. "
    "Until then I stay quiet here{ask}.",
    "de": "Ich übergebe dieses Gespräch an eine Person aus unserem Support-Team; {when}. "
    "Bis dahin bin ich hier still{ask}.",
    "ru": "Я передаю этот разговор сотруднику поддержки; {when}. До тех пор я молчу{ask}.",
}
# Telegram's /ask command, named only where it exists.
_ASK_IN_TELEGRAM = {
    "en": " — write /ask before a question if you want my answer",
    "de": " – schreiben Sie /ask vor eine Frage, wenn Sie meine Antwort möchten",
    "ru": " — напишите /ask перед вопросом, если нужен мой ответ",
}
_SOON = {
    "en": "they will reply here shortly",
    "de": "sie antwortet hier in Kürze",
    "ru": "он ответит здесь в ближайшее время",
}
# No office hours configured: no time is promised.
_WHEN_THEY_CAN = {
    "en": "they will reply here as soon as they can",
    "de": "sie antwortet hier, sobald sie kann",
    "ru": "он ответит здесь, как только сможет",
}
_LATER = {
    "en": "our office is closed now, so they will reply when the next shift starts, {start}",
    "de": "unser Büro ist gerade geschlossen; sie antwortet, sobald die nächste Schicht "
    "beginnt, {start}",
    "ru": "сейчас офис закрыт, поэтому он ответит, когда начнётся следующая смена, {start}",
}
_DAYS = {
    "en": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "de": ("Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag", "Samstag", "Sonntag"),
    "ru": ("в понедельник", "во вторник", "в среду", "в четверг", "в пятницу", "в субботу",
           "в воскресенье"),
}  # fmt: skip
_RESUMED = {
    "en": "Our support team has finished here; I am answering your questions again.",
    "de": "Unser Support-Team ist hier fertig; ich beantworte Ihre Fragen wieder.",
    "ru": "Сотрудник поддержки завершил разговор; я снова отвечаю на ваши вопросы.",
}


def takeover_notice(
    language: str, next_shift: datetime | None, channel: str, *, office_hours: bool = True
) -> str:
    """`language`: the client's (ISO 639-1); `next_shift`: None while the office is
    staffed, else when the next shift starts (in the office's time zone); `channel`: where
    the notice goes (`telegram`, `api`, `widget`); `office_hours`: whether any are
    configured (without, `next_shift` is not read and no time is named)."""
    language = language if language in _TAKEOVER else "en"
    if not office_hours:
        when = _WHEN_THEY_CAN[language]
    elif next_shift is None:
        when = _SOON[language]
    else:
        start = (
            f"{_DAYS[language][next_shift.weekday()]} {next_shift:%H:%M} ({next_shift.tzname()})"
        )
        when = _LATER[language].format(start=start)
    ask = _ASK_IN_TELEGRAM[language] if channel == "telegram" else ""
    return _TAKEOVER[language].format(when=when, ask=ask)


_BOT_BACK = {
    "en": "All right, no person then: I am answering your questions again.",
    "de": "In Ordnung, dann ohne Mitarbeiter: Ich beantworte Ihre Fragen wieder.",
    "ru": "Хорошо, без сотрудника: я снова отвечаю на ваши вопросы.",
}


def bot_back_notice(language: str) -> str:
    """The client did not want a person after all, and nobody had taken over yet."""
    return _BOT_BACK.get(language, _BOT_BACK["en"])


def resumed_notice(language: str) -> str:
    return _RESUMED.get(language, _RESUMED["en"])
