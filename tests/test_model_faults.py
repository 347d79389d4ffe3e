"""Model and tool faults through the real app, against the scripted OpenAI-compatible
provider on 127.0.0.1: what the provider received, what the caller got, what was stored."""

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select

from app.agent.memory.profiles import MemoryProfile, SummaryPolicy
from app.agent.models import OUT_OF_STEPS, retry_after_seconds
from app.agent.offline import CANNOT_SEARCH
from app.agent.offline.replies import NOT_FOUND, smalltalk_reply
from app.agent.tools import ASK_EXPERT, KNOWLEDGE_TOOL, UNAVAILABLE
from app.bench.scripted_llm import Fault, Reply, ScriptedLLM
from app.db.engine import sync_url
from app.db.models import Message, Turn
from app.settings import DbSettings, LLMSettings, Settings
from tests.conftest import PG_ADMIN_URL, _admin, make_client
from tests.pg_server import with_database
from tests.test_widget_api import events

QUESTION = "How do I create an invoice?"


@pytest.fixture
def scripted() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM(retry_after_seconds=1, hang_seconds=10)
    with server:
        yield server


def use_scripted(settings: Settings, server: ScriptedLLM, **llm: Any) -> None:
    """The real model path: an OpenAI-compatible endpoint, a dummy key, no backoff waits."""
    settings.llm = LLMSettings(
        model="scripted",
        base_url=server.base_url,
        api_key="dummy",
        retry_initial_delay_seconds=0,
        **llm,
    )


def ask(client: TestClient, text: str = QUESTION, key: str = "faults") -> Any:
    return client.post(
        f"/v1/conversations/{key}/messages",
        json={"audience": "client", "author": "Jo", "text": text},
    )


def turn_statuses(settings: Settings) -> list[str]:
    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        statuses = list(connection.scalars(select(Turn.status).order_by(Turn.id)))
    engine.dispose()
    return statuses


def stored_roles(settings: Settings) -> list[str]:
    """Every stored message's role, the model's tool calls and results included (a
    client's transcript leaves those out)."""
    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        roles = list(connection.scalars(select(Message.role).order_by(Message.seq)))
    engine.dispose()
    return roles


def stored(client: TestClient, key: str = "faults") -> list[tuple[str, str]]:
    messages = client.get(f"/v1/conversations/{key}").json()["messages"]
    return [(m["role"], m["content"]) for m in messages]


def test_a_rate_limit_is_retried_after_the_wait_the_provider_asked_for(
    settings: Settings, sample_index: Path, scripted: ScriptedLLM
) -> None:
    use_scripted(settings, scripted)
    scripted.add(Fault.RATE_LIMIT)
    with make_client(settings, sample_index) as client:
        response = ask(client)
    assert response.status_code == 200
    assert response.json()["text"].startswith("**From the help center:**")
    first, retry, answer = scripted.received
    assert (first.fault, retry.fault, answer.fault) == (Fault.RATE_LIMIT, None, None)
    assert retry.body["messages"] == first.body["messages"]  # the same request, again
    assert retry.at - first.at >= 1.0  # Retry-After: 1, although the backoff is 0
    assert turn_statuses(settings) == ["ok"]


def test_no_wait_follows_the_last_attempt(settings: Settings, sample_index: Path) -> None:
    """A provider asking for 30 s after the last attempt: the fallback is tried at once,
    well within a turn's 10 s, instead of after a wait no retry follows."""
    server = ScriptedLLM([Fault.RATE_LIMIT], retry_after_seconds=30)
    with server:
        use_scripted(settings, server, max_retries=0, fallback_model="scripted-fallback")
        settings.chat.turn_timeout_seconds = 10
        with make_client(settings, sample_index) as client:
            response = ask(client)
    assert response.status_code == 200, response.text
    assert [(r.body["model"], r.fault) for r in server.received][:2] == [
        ("scripted", Fault.RATE_LIMIT),
        ("scripted-fallback", None),
    ]
    assert turn_statuses(settings) == ["ok"]


def test_the_offline_fallback_reads_the_configured_decisions(
    settings: Settings, sample_index: Path, scripted: ScriptedLLM
) -> None:
    """Small talk configured away (no message reads as it with certainty): the offline
    fallback searches a greeting instead of greeting back, as the default settings would."""
    use_scripted(settings, scripted, max_retries=0, fallback_model="offline")
    settings.decisions = settings.decisions.model_copy(update={"smalltalk_confidence": 1.0})
    scripted.add(*[Fault.SERVER_ERROR] * 3)  # the main model fails every step it is asked
    with make_client(settings, sample_index) as client:
        response = ask(client, "Hello!")
    assert response.status_code == 200, response.text
    assert {r.fault for r in scripted.received} == {Fault.SERVER_ERROR}
    reply = response.json()
    assert reply["text"] != smalltalk_reply("en")
    assert reply["text"].startswith(NOT_FOUND) and reply["usage"]["llm_calls"] == 2  # searched


@pytest.mark.parametrize("fault", [Fault.TIMEOUT, Fault.DROP, Fault.MALFORMED, Fault.BAD_GATEWAY])
def test_a_transient_fault_is_retried_and_answered(
    settings: Settings, sample_index: Path, scripted: ScriptedLLM, fault: Fault
) -> None:
    use_scripted(settings, scripted, timeout_seconds=0.5)
    scripted.add(Reply.call(KNOWLEDGE_TOOL, query="invoice"), fault)
    with make_client(settings, sample_index) as client:
        response = ask(client)
    assert response.status_code == 200
    assert [r.fault for r in scripted.received] == [None, fault, None]
    # The retry resends the request that failed: the question and the search result.
    assert scripted.requests[2]["messages"] == scripted.requests[1]["messages"]
    assert scripted.requests[2]["messages"][-1]["role"] == "tool"
    assert response.json()["text"].startswith("**From the help center:**")


def test_a_streamed_turn_retries_before_any_token_is_sent(
    settings: Settings, sample_index: Path, scripted: ScriptedLLM
) -> None:
    use_scripted(settings, scripted)
    scripted.add(Reply.call(KNOWLEDGE_TOOL, query="invoice"), Fault.UNAVAILABLE)
    with make_client(settings, sample_index) as client:
        response = client.post(
            "/v1/conversations/faults/messages/stream",
            json={"audience": "client", "author": "Jo", "text": QUESTION},
        )
    sequence = events(response.text)
    assert [kind for kind, _ in sequence][-1] == "done"
    streamed = "".join(str(data["text"]) for kind, data in sequence if kind == "token")
    assert streamed == sequence[-1][1]["text"]  # the failed attempt sent no token twice
    assert [(r.body["stream"], r.fault) for r in scripted.received] == [
        (True, None),
        (True, Fault.UNAVAILABLE),
        (True, None),
    ]


def test_server_errors_beyond_the_retries_are_answered_by_the_fallback_model(
    settings: Settings, sample_index: Path, scripted: ScriptedLLM
) -> None:
    use_scripted(settings, scripted, max_retries=2, fallback_model="scripted-fallback")
    scripted.add(Fault.SERVER_ERROR, Fault.UNAVAILABLE, Fault.BAD_GATEWAY)
    with make_client(settings, sample_index) as client:
        response = ask(client)
        history = stored(client)
    assert response.status_code == 200
    assert [(r.body["model"], r.fault) for r in scripted.received] == [
        ("scripted", Fault.SERVER_ERROR),
        ("scripted", Fault.UNAVAILABLE),
        ("scripted", Fault.BAD_GATEWAY),
        ("scripted-fallback", None),  # calls search_knowledge_base
        ("scripted", None),  # the next step tries the main model first again
    ]
    assert history[0] == ("user", QUESTION)
    assert history[-1] == ("assistant", response.json()["text"])
    assert turn_statuses(settings) == ["ok"]


def test_without_a_fallback_the_turn_fails_after_the_retries_and_keeps_the_message(
    settings: Settings, sample_index: Path, scripted: ScriptedLLM
) -> None:
    use_scripted(settings, scripted, max_retries=1)
    scripted.add(Fault.UNAVAILABLE, Fault.UNAVAILABLE)
    with make_client(settings, sample_index) as client:
        response = ask(client)
        history = stored(client)
    assert response.status_code == 502
    assert "your message was kept" in response.json()["detail"]
    assert [r.fault for r in scripted.received] == [Fault.UNAVAILABLE, Fault.UNAVAILABLE]
    assert history == [("user", QUESTION)]
    assert turn_statuses(settings) == ["failed"]


def test_a_turn_out_of_steps_ends_with_an_answer_saying_so(
    settings: Settings, sample_index: Path
) -> None:
    # A model that never stops searching.
    server = ScriptedLLM(policy=lambda body: Reply.call(KNOWLEDGE_TOOL, query="invoice"))
    with server:
        use_scripted(settings, server, max_agent_steps=3)
        with make_client(settings, sample_index) as client:
            response = ask(client)
            history = stored(client)
    assert response.status_code == 200
    assert response.json()["text"] == OUT_OF_STEPS
    assert len(server.requests) == 3
    assert history == [("user", QUESTION), ("assistant", OUT_OF_STEPS)]
    assert stored_roles(settings).count("tool") == 3
    assert turn_statuses(settings) == ["ok"]


def test_the_knowledge_base_down_is_answered_without_it_and_readyz_names_it(
    settings: Settings, sample_index: Path, scripted: ScriptedLLM
) -> None:
    use_scripted(settings, scripted, tool_max_retries=1)
    with make_client(settings, sample_index) as client:
        assert client.get("/readyz").json()["down"] == []
        client.app.state.runtime.knowledge_client.release()  # type: ignore[attr-defined]
        response = ask(client)
        ready = client.get("/readyz")
    assert response.status_code == 200
    tool_result = scripted.requests[1]["messages"][-1]
    assert (tool_result["role"], tool_result["content"]) == ("tool", UNAVAILABLE[KNOWLEDGE_TOOL])
    assert "The knowledge base is unavailable right now." in response.json()["text"]
    assert ready.status_code == 503
    assert ready.json()["down"] == ["vector_store"]


def test_web_search_down_is_answered_without_the_expert(
    settings: Settings, sample_index: Path, scripted: ScriptedLLM
) -> None:
    use_scripted(settings, scripted, tool_max_retries=1)
    settings.expert.searxng_url = "http://127.0.0.1:9"  # nothing listens: every search fails
    scripted.add(Reply.call(ASK_EXPERT, question="Is GnuCash 5.9 released?"))
    with make_client(settings, sample_index) as client:
        response = ask(client, "Is GnuCash 5.9 out yet?")
    assert response.status_code == 200
    tool_result = scripted.requests[1]["messages"][-1]
    assert (tool_result["role"], tool_result["content"]) == ("tool", UNAVAILABLE[ASK_EXPERT])
    assert "Web research is unavailable right now." in response.json()["text"]


def test_the_offline_model_says_it_cannot_search_when_the_knowledge_base_is_down(
    settings: Settings, sample_index: Path
) -> None:
    settings.llm.retry_initial_delay_seconds = 0
    with make_client(settings, sample_index) as client:
        client.app.state.runtime.knowledge_client.release()  # type: ignore[attr-defined]
        response = ask(client)
    assert response.status_code == 200
    assert response.json()["text"] == CANNOT_SEARCH


@pytest.mark.postgres
def test_readyz_names_the_database_when_it_is_down(settings: Settings, sample_index: Path) -> None:
    name = f"supportbot_down_{uuid.uuid4().hex[:10]}"
    _admin(f'CREATE DATABASE "{name}"')
    settings.db = DbSettings(url=with_database(PG_ADMIN_URL, name))
    try:
        with make_client(settings, sample_index) as client:
            assert client.get("/readyz").status_code == 200
            _admin(f'DROP DATABASE "{name}" WITH (FORCE)')  # the database goes away
            ready = client.get("/readyz")
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert ready.status_code == 503
    assert ready.json() == {
        "ready": False,
        "database": False,
        "vector_store": True,
        "warmed_up": True,
        "down": ["database"],
    }


def test_a_failing_summary_model_keeps_every_message_and_the_next_turn_folds(
    settings: Settings, sample_index: Path, scripted: ScriptedLLM
) -> None:
    use_scripted(settings, scripted, summary_model="scripted-summary", max_retries=1)
    settings.profiles.definitions["client"] = MemoryProfile(
        description="fold after two exchanges, keep one",
        summary=SummaryPolicy(trigger_exchanges=3, keep_exchanges=1),
    )
    questions = ["How do I create an invoice?", "How do I record a payment?", "Where is VAT?"]
    with make_client(settings, sample_index) as client:
        for question in questions[:2]:
            assert ask(client, question).status_code == 200
        # The fold due this turn fails, its client's one retry too.
        scripted.fail_next(Fault.SERVER_ERROR, Fault.SERVER_ERROR)
        third = len(scripted.received)
        assert ask(client, questions[2]).status_code == 200
        fourth = len(scripted.received)
        assert ask(client, "And the VAT report?").status_code == 200

    *failed_folds, agent_call, answer_call = scripted.received[third:fourth]
    assert [(r.body["model"], r.fault) for r in failed_folds] == [
        ("scripted-summary", Fault.SERVER_ERROR)
    ] * 2
    third_turn = [agent_call, answer_call]
    sent = third_turn[0].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == [f"Jo: {q}" for q in questions]
    assert len(sent) == 1 + 4 + 4 + 1  # system, two whole exchanges, the new question

    fold, *fourth_turn = scripted.received[fourth:]
    assert (fold.body["model"], fold.fault) == ("scripted-summary", None)
    sent = fourth_turn[0].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["Jo: And the VAT report?"]


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "250", "retry-after": "3"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date in the past
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_is_read_from_the_error_response(
    headers: dict[str, str], seconds: float | None
) -> None:
    # openai 3 builds its errors on httpx2 responses
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx2.Response(429, headers=headers, request=request)
    error = openai.RateLimitError("rate limited", response=response, body=None)
    assert retry_after_seconds(error) == seconds
    assert retry_after_seconds(ValueError("no response")) is None


def test_a_failed_turn_gives_back_the_tokens_it_reserved(
    settings: Settings, sample_index: Path, scripted: ScriptedLLM
) -> None:
    """Each turn reserves the whole budget: the next starts only if a failure gave it back."""
    use_scripted(settings, scripted, max_retries=0)
    settings.api.caller_token_budget = "1000/hour"
    settings.api.turn_token_estimate = 1000
    scripted.add(Fault.UNAVAILABLE, Fault.UNAVAILABLE)
    with make_client(settings, sample_index) as client:
        assert ask(client).status_code == 502
        streamed = client.post(
            "/v1/conversations/faults/messages/stream",
            json={"audience": "client", "author": "Jo", "text": QUESTION},
        )
        assert [kind for kind, _ in events(streamed.text)] == ["error"]
        assert ask(client).status_code == 200
    assert turn_statuses(settings) == ["failed", "failed", "ok"]
