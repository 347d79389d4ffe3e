"""The offline model's own sentences, in the asker's language: English for a language it
has no wording for (the answer itself is still searched and quoted)."""

NOT_FOUND = "I could not find this in the documentation."
CANNOT_SEARCH = "I cannot search the knowledge base right now. Please try again later."

_NOT_FOUND = {
    "en": NOT_FOUND,
    "de": "Dazu habe ich in der Dokumentation nichts gefunden.",
    "ru": "Я не нашёл этого в документации.",
}
# Each language's way of saying it, as the offline summary model recognises an answer
# that found nothing.
NOT_FOUND_SAYINGS = tuple(_NOT_FOUND.values())
_TRY_AGAIN = {
    "en": "Could you rephrase it, for example with the name of the menu or window you are "
    "in? If the documentation does not cover it, a person from the support team can help.",
    "de": "Können Sie die Frage anders formulieren, etwa mit dem Namen des Menüs oder "
    "Fensters? Steht es nicht in der Dokumentation, hilft Ihnen eine Person aus dem "
    "Support-Team weiter.",
    "ru": "Попробуйте переформулировать вопрос, например назовите меню или окно. Если "
    "в документации этого нет, вам поможет сотрудник поддержки.",
}
# One reply to a greeting, a thank-you or an acknowledgement alike.
_SMALLTALK = {
    "en": "Glad to help! Ask me how to do something and I will look it up in the documentation.",
    "de": "Gern! Fragen Sie mich, wie etwas geht, und ich schlage es in der Dokumentation nach.",
    "ru": "Рад помочь! Спросите, как что-то сделать, и я найду ответ в документации.",
}
# A "remember that …" saved to the person's memory, and one kept in this conversation only.
_NOTED = {
    "en": "Noted: {fact}. Saved to your memory ({place}): I will remember it in your next "
    "conversations too.",
    "de": "Notiert: {fact}. Gespeichert in Ihrem Gedächtnis ({place}): ich erinnere mich "
    "auch in Ihren nächsten Gesprächen daran.",
    "ru": "Запомнил: {fact}. Сохранено в вашей памяти ({place}): я вспомню это и в "
    "следующих разговорах.",
}
_THIS_CONVERSATION_ONLY = {
    "en": "I will keep this in mind for this conversation only: {fact}. Nothing is saved "
    "for your next conversations.",
    "de": "Das behalte ich nur für dieses Gespräch: {fact}. Für Ihre nächsten Gespräche "
    "wird nichts gespeichert.",
    "ru": "Учту это только в этом разговоре: {fact}. Для следующих разговоров ничего не "
    "сохраняется.",
}
_SEE_ALSO = {"en": "Details: “{page}”.", "de": "Mehr dazu: „{page}“.", "ru": "Подробнее: «{page}»."}
# An unsure answer: the documentation has pages near the question, none that holds it.
_UNSURE = {
    "en": "I am not sure the documentation answers this. These pages may help: {pages}.",
    "de": "Ich bin nicht sicher, ob die Dokumentation das beantwortet. Diese Seiten könnten "
    "helfen: {pages}.",
    "ru": "Не уверен, что в документации есть ответ на это. Возможно, помогут эти страницы: "
    "{pages}.",
}
_QUOTES = {"en": "“{}”", "de": "„{}“", "ru": "«{}»"}
_ASK_A_PERSON = {
    "en": "If they do not, a person from the support team can help.",
    "de": "Wenn nicht, hilft Ihnen eine Person aus dem Support-Team weiter.",
    "ru": "Если нет, вам поможет сотрудник поддержки.",
}


def _in(templates: dict[str, str], language: str) -> str:
    return templates.get(language, templates["en"])


def not_found_reply(language: str, *, suggest: bool = True) -> str:
    found = _in(_NOT_FOUND, language)
    return f"{found} {_in(_TRY_AGAIN, language)}" if suggest else found


def smalltalk_reply(language: str) -> str:
    return _in(_SMALLTALK, language)


def noted_reply(language: str, fact: str, place: str | None) -> str:
    """The answer to "remember that …": nothing to look up. `place`: where the fact is
    saved; None when it stays in this conversation only."""
    if place is None:
        return _in(_THIS_CONVERSATION_ONLY, language).format(fact=fact)
    return _in(_NOTED, language).format(fact=fact, place=place)


def see_also(language: str, page: str) -> str:
    return _in(_SEE_ALSO, language).format(page=page)


def unsure_reply(language: str, pages: list[str]) -> str:
    """The answer when pages came near the question but none holds it: say so, offer
    them."""
    quote = _in(_QUOTES, language)
    listed = ", ".join(quote.format(page) for page in pages)
    return f"{_in(_UNSURE, language).format(pages=listed)} {_in(_ASK_A_PERSON, language)}"
