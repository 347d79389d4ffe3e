"""How a question meets a saved answer (knowledge/team_answers.py, knowledge/evidence.py),
over the sample knowledge base with its own calibration and the offline model: each
wording is a passage of its own, in its own language, judged by its nearness and its lead
over every other page, not by the words it shares with the question."""

from fastapi.testclient import TestClient

from tests.team_answers.conftest import ALICE, ask
from tests.team_answers.test_found_by_the_bot import team_citations

DARK_MODE = {
    "question": "Is there a dark mode?",
    "answer": "Yes. Open **Profile → Appearance** and choose *Dark*. By default Ledgerly "
    "follows your device's theme.",
    "languages": ["en"],
}
# In German, with a Russian wording: neither is the documentation's language (English).
GOOGLE = {
    "question": "Kann ich mich mit meinem Google-Konto anmelden?",
    "variants": ["Можно ли войти через Google?"],
    "answer": "Ja. Wählen Sie auf der Anmeldeseite **Mit Google anmelden**; das Google-Konto "
    "muss dieselbe E-Mail-Adresse haben wie Ihr Ledgerly-Zugang.",
    "languages": ["de"],
}


def test_a_paraphrase_and_a_wording_in_a_third_language_find_their_answer(
    api: TestClient,
) -> None:
    dark = api.post("/v1/answers", json=DARK_MODE, headers=ALICE).json()
    google = api.post("/v1/answers", json=GOOGLE, headers=ALICE).json()
    for key, question, saved, fact in [
        # Shares no content word with the answer but "dark"'s stem.
        (
            "paraphrase",
            "The white screen hurts my eyes at night, can the interface be darker?",
            dark,
            "Profile → Appearance",
        ),
        ("russian", "Можно ли войти через аккаунт Google?", google, "Mit Google anmelden"),
    ]:
        reply = ask(api, key, question)
        assert fact in reply["text"], (question, reply["text"])
        (cited,) = team_citations(reply)
        assert cited["source"] == f"answers/{saved['id']}"
        assert cited["title"].startswith("Support team answer")


def test_a_near_question_the_docs_answer_and_an_unrelated_one_do_not_quote_it(
    api: TestClient,
) -> None:
    api.post("/v1/answers", json=DARK_MODE, headers=ALICE)
    api.post("/v1/answers", json=GOOGLE, headers=ALICE)
    # Next to the Google answer (sign-in), answered by the page on users and roles (which
    # the offline model offers first: it says "require", not "turn on").
    near = ask(api, "two-step", "How do I turn on two-step verification?")
    assert not team_citations(near), near["citations"]
    assert [c["source"] for c in near["citations"]][:1] == ["en/users-roles.md"]
    assert "Mit Google anmelden" not in near["text"]

    unrelated = ask(api, "france", "What is the capital of France?")
    assert unrelated["citations"] == [] and "Appearance" not in unrelated["text"]
