"""/v1/answers: staff only on every route, before the body is read; create, read, list,
edit, delete, and what each refuses."""

from fastapi.testclient import TestClient

from tests.team_answers.conftest import ALICE, CLIENT, PAYPAL, ask

ROUTES = [
    ("get", "/v1/answers"),
    ("post", "/v1/answers"),
    ("get", "/v1/answers/1"),
    ("patch", "/v1/answers/1"),
    ("delete", "/v1/answers/1"),
    ("get", "/v1/answers/draft/1"),
]


def test_every_answer_route_is_for_staff_only(api: TestClient) -> None:
    created = api.post("/v1/answers", json=PAYPAL, headers=ALICE)
    assert created.status_code == 201, created.text
    for method, path in ROUTES:
        body = b"{not json" if method in ("post", "patch") else None
        assert api.request(method, path, content=body).status_code == 401, (method, path)
        refused = api.request(method, path, headers=CLIENT, content=body)
        assert refused.status_code == 403, (method, path, refused.text)
        assert refused.json() == {"detail": "an API key is not a staff credential"}
    assert api.get("/v1/answers/1", headers=ALICE).json()["question"] == PAYPAL["question"]


def test_staff_create_read_list_edit_and_delete_answers(api: TestClient) -> None:
    created = api.post("/v1/answers", json=PAYPAL | {"languages": ["EN"]}, headers=ALICE).json()
    assert created["author"] == "alice"
    assert created["source"] == f"answers/{created['id']}"
    assert created["languages"] == ["en"] and created["enabled"] and created["collection"] == "kb"
    other = {
        "question": "Wie kündige ich?",
        "answer": "Unter Einstellungen → Abo.",
        "enabled": False,
    }
    second = api.post("/v1/answers", json=other, headers=ALICE).json()
    assert second["languages"] == ["de"]  # read from the text

    listed = api.get("/v1/answers", headers=ALICE).json()
    assert [a["id"] for a in listed] == [second["id"], created["id"]]  # newest first
    enabled = api.get("/v1/answers?enabled=true", headers=ALICE).json()
    assert [a["id"] for a in enabled] == [created["id"]]
    assert api.get("/v1/answers?collection=other", headers=ALICE).json() == []

    path = f"/v1/answers/{created['id']}"
    edited = api.patch(path, json={"variants": ["PayPal?", " ", "PayPal?"]}, headers=ALICE).json()
    assert edited["variants"] == ["PayPal?"] and edited["answer"] == PAYPAL["answer"]
    assert edited["updated_at"] >= created["updated_at"]
    assert api.delete(path, headers=ALICE).status_code == 204
    assert api.get(path, headers=ALICE).json() == {"detail": f"no answer {created['id']}"}
    assert api.delete(path, headers=ALICE).status_code == 404
    assert api.patch(path, json={"enabled": True}, headers=ALICE).status_code == 404


def test_answers_that_say_nothing_are_refused(api: TestClient) -> None:
    blank = api.post("/v1/answers", json=PAYPAL | {"answer": "   "}, headers=ALICE)
    assert blank.status_code == 422 and "answer" in blank.json()["detail"]
    unknown = api.post("/v1/answers", json=PAYPAL | {"languages": ["xx"]}, headers=ALICE)
    assert unknown.status_code == 422 and "unknown language codes" in unknown.json()["detail"]
    bad = api.post("/v1/answers", json=PAYPAL | {"collection": "../kb"}, headers=ALICE)
    assert bad.status_code == 422
    assert api.get("/v1/answers", headers=ALICE).json() == []


def test_a_length_limit_counts_the_text_as_sent(api: TestClient) -> None:
    """The schema's maxLength is what a client counts: a control character or a
    decomposed accent that the cleaning takes out or joins still counts."""
    over: list[dict[str, object]] = [
        {"answer": "a" * 8192 + "\u0012"},
        {"answer": "e\u0301" * 4097},
        {"question": "q" * 1000 + "\u0000"},
        {"variants": ["v" * 1000 + "\u0007"]},
    ]
    for change in over:
        refused = api.post("/v1/answers", json=PAYPAL | change, headers=ALICE)
        assert refused.status_code == 422, (change, refused.text)
    at_limit = api.post(
        "/v1/answers", json=PAYPAL | {"answer": "a" * 8191 + "\u0012"}, headers=ALICE
    )
    assert at_limit.status_code == 201 and at_limit.json()["answer"] == "a" * 8191
    path = f"/v1/answers/{at_limit.json()['id']}"
    assert api.patch(path, json=over[0], headers=ALICE).status_code == 422


def staff_reply(api: TestClient, text: str) -> int:
    """Claim the open handoff, reply `text`: the staff message's id."""
    (handoff,) = api.get("/v1/handoffs?status=open", headers=ALICE).json()
    api.post(f"/v1/handoffs/{handoff['id']}/claim", headers=ALICE)
    sent = api.post(f"/v1/handoffs/{handoff['id']}/messages", json={"text": text}, headers=ALICE)
    assert sent.status_code == 201, sent.text
    message_id: int = sent.json()["id"]
    api.post(f"/v1/handoffs/{handoff['id']}/resolve", headers=ALICE)
    return message_id


def test_a_staff_reply_drafts_an_answer_to_the_question_before_it(api: TestClient) -> None:
    """The question: the customer's last one the bot searched for or held for staff, never
    the request for a person."""
    ask(api, "searched", "How do I create an invoice?")
    ask(api, "searched", "Can I talk to a human?")
    reply = staff_reply(api, "Sales → Invoices → New invoice.")
    draft = api.get(f"/v1/answers/draft/{reply}", headers=ALICE)
    assert draft.json() == {
        "question": "How do I create an invoice?",
        "answer": "Sales → Invoices → New invoice.",
    }

    ask(api, "held", "How do I create an invoice?")
    ask(api, "held", "Can I talk to a human?")
    ask(api, "held", "Can I pay with PayPal?")  # held for the staff member
    reply = staff_reply(api, "Yes, under Billing.")
    draft = api.get(f"/v1/answers/draft/{reply}", headers=ALICE)
    assert draft.json()["question"] == "Can I pay with PayPal?"

    first = api.get("/v1/conversations/api:shop:held", headers=ALICE).json()["messages"][0]
    for not_staff in (first["id"], 2**31 - 1):
        missing = api.get(f"/v1/answers/draft/{not_staff}", headers=ALICE)
        assert missing.status_code == 404
        assert missing.json() == {"detail": f"message {not_staff} is no staff reply"}
