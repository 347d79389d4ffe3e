"""With a real model (the scripted OpenAI-compatible provider on 127.0.0.1), the model
decides who gets a person unless the request is unambiguous: what the provider receives."""

from pathlib import Path

from app.bench.scripted_llm import Fault, ScriptedLLM
from app.decisions.decider import decider_for
from app.handoff.tool import REQUEST_HUMAN
from app.settings import DecisionSettings, Settings
from tests.conftest import make_client
from tests.test_model_faults import ask, scripted, use_scripted

__all__ = ["scripted"]  # the provider fixture


# Reads as a request for a person, with less than the 0.9 asked for below.
UNSURE = "could someone who knows more look at this?"


def test_an_unambiguous_request_skips_the_model_an_uncertain_one_goes_to_it(
    settings: Settings, sample_index: Path, scripted: ScriptedLLM
) -> None:
    use_scripted(settings, scripted)
    settings.decisions = DecisionSettings(person_confidence_before_model=0.9)
    read = decider_for(settings.knowledge.embedder, settings.decisions).decide(UNSURE)
    assert settings.decisions.person_confidence <= read.person < 0.9
    with make_client(settings, sample_index) as client:
        sure = ask(client, "I want to talk to a human, right now please", key="sure")
        assert sure.status_code == 200 and "person from our support team" in sure.json()["text"]
        assert scripted.requests == []  # handed over before any model call

        unsure = ask(client, UNSURE, key="unsure")
        assert unsure.status_code == 200
        (first, *_) = scripted.requests
        sent = [m.get("content") for m in first["messages"]]
        assert any(UNSURE in str(c) for c in sent)
        assert REQUEST_HUMAN in [tool["function"]["name"] for tool in first["tools"]]


def test_an_uncertain_request_is_answered_by_the_model_through_a_provider_fault(
    settings: Settings, sample_index: Path, scripted: ScriptedLLM
) -> None:
    use_scripted(settings, scripted)
    settings.decisions = DecisionSettings(person_confidence_before_model=0.9)
    scripted.fail_next(Fault.BAD_GATEWAY)
    with make_client(settings, sample_index) as client:
        reply = ask(client, UNSURE, key="fault")
        assert reply.status_code == 200 and reply.json()["text"]
        stored = client.get("/v1/conversations/fault").json()["messages"]
    assert scripted.received[0].fault == Fault.BAD_GATEWAY
    assert len(scripted.requests) >= 2  # the 502, then the retry the model answered
    assert stored[0]["role"] == "user" and stored[0]["content"] == UNSURE
    assert stored[-1]["role"] == "assistant" and stored[-1]["content"] == reply.json()["text"]
