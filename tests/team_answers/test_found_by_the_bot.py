"""A saved answer answers the next customer's question, reworded or in German, with the
offline model over the sample knowledge base and the collection's own calibration; an
unrelated question never cites it; disabled or deleted, it is not found any more."""

import pytest
from fastapi.testclient import TestClient

from tests.team_answers.conftest import ALICE, PAYPAL, ask

SENTENCE = "choose PayPal and sign in to your PayPal account"
REWORDED = "Is PayPal accepted for the subscription?"
GERMAN = "Kann ich mein Abonnement mit PayPal bezahlen?"


def team_citations(reply: dict) -> list[dict]:
    return [c for c in reply["citations"] if c["source"].startswith("answers/")]


def test_a_saved_answer_answers_the_next_customer(api: TestClient) -> None:
    before = ask(api, "before", REWORDED)
    assert not team_citations(before) and "Settings → Billing" not in before["text"]

    saved = api.post("/v1/answers", json=PAYPAL, headers=ALICE).json()
    date = saved["updated_at"][:10]
    for key, question in [("reworded", REWORDED), ("german", GERMAN)]:
        reply = ask(api, key, question)
        assert "Settings → Billing → Payment method" in reply["text"], (question, reply["text"])
        assert "PayPal" in reply["text"] and "sign in to your PayPal account" in reply["text"]
        (cited,) = team_citations(reply)
        assert cited["source"] == f"answers/{saved['id']}"
        assert cited["title"] == f"Support team answer ({date})"
        assert cited["heading"] in [PAYPAL["question"], *PAYPAL["variants"]]  # the nearest

    for key, unrelated in [
        ("invoice", "How do I create an invoice?"),
        ("rechnung", "Wie erstelle ich eine Rechnung?"),
        ("france", "What is the capital of France?"),
    ]:
        reply = ask(api, key, unrelated)
        assert not team_citations(reply), (unrelated, reply["citations"])
        assert "sign in to your PayPal account" not in reply["text"]


@pytest.mark.xfail(
    strict=True,
    reason="a saved answer is judged by its nearness and lead: a question next to it asking "
    "what it does not hold comes as near as a paraphrase (docs/knowledge.md)",
)
def test_a_question_next_to_a_saved_answer_asking_something_else_is_not_quoted_it(
    api: TestClient,
) -> None:
    api.post("/v1/answers", json=PAYPAL, headers=ALICE)
    near = ask(api, "bitcoin", "Can I pay in bitcoin?")
    assert "sign in to your PayPal account" not in near["text"]


def test_an_edit_is_found_at_once_and_a_disabled_or_deleted_answer_is_not(
    api: TestClient,
) -> None:
    saved = api.post("/v1/answers", json=PAYPAL, headers=ALICE).json()
    path = f"/v1/answers/{saved['id']}"
    edited = str(PAYPAL["answer"]).replace("Payment method", "Payment options")
    api.patch(path, json={"answer": edited}, headers=ALICE)
    assert "Settings → Billing → Payment options" in ask(api, "edited", REWORDED)["text"]

    api.patch(path, json={"enabled": False}, headers=ALICE)
    assert not team_citations(ask(api, "disabled", REWORDED))
    api.patch(path, json={"enabled": True}, headers=ALICE)
    assert team_citations(ask(api, "enabled", GERMAN))

    assert api.delete(path, headers=ALICE).status_code == 204
    for key, question in [("deleted", REWORDED), ("geloescht", GERMAN)]:
        reply = ask(api, key, question)
        assert not team_citations(reply) and "Payment options" not in reply["text"]
