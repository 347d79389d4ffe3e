"""`/ask` written at the start of an HTTP message, end to end: the app against the scripted
OpenAI-compatible provider on 127.0.0.1 (its first answer a 500). The model is sent what
follows the command, and the transcript keeps that; a message that only starts like the
command reaches the model as written."""

from pathlib import Path

from app.bench.scripted_llm import Fault, Reply, ScriptedLLM
from app.settings import LLMSettings, Settings
from tests.conftest import make_client


def _sent_and_kept(settings: Settings, sample_index: Path, text: str) -> tuple[str, str]:
    """The user message the provider received, and the one the transcript kept."""
    server = ScriptedLLM(retry_after_seconds=1)
    with server:
        settings.llm = LLMSettings(
            model="scripted", base_url=server.base_url, api_key="dummy",
            retry_initial_delay_seconds=0,
        )  # fmt: skip
        server.fail_next(Fault.SERVER_ERROR)
        server.add(Reply("See the invoices page."))
        with make_client(settings, sample_index) as api:
            path = "/v1/conversations/api:ask"
            body = {"audience": "client", "author": "Jo", "text": text}
            assert api.post(f"{path}/messages", json=body).status_code == 200
            transcript = api.get(path).json()
        assert [str(r.fault) for r in server.received if r.fault] == [str(Fault.SERVER_ERROR)]
        sent = server.received[-1].body["messages"]
    (user,) = [m["content"] for m in sent if m["role"] == "user"]
    (kept,) = [m["content"] for m in transcript["messages"] if m["role"] == "user"]
    return user, kept


def test_the_command_reaches_neither_the_model_nor_the_transcript(
    settings: Settings, sample_index: Path
) -> None:
    sent, kept = _sent_and_kept(settings, sample_index, "/ask@ShopBot how do I create an invoice?")
    assert sent == "Jo: how do I create an invoice?"
    assert kept == "how do I create an invoice?"


def test_a_message_that_only_starts_like_the_command_is_sent_as_written(
    settings: Settings, sample_index: Path
) -> None:
    text = "/asking for a friend: how do I create an invoice?"
    sent, kept = _sent_and_kept(settings, sample_index, text)
    assert (sent, kept) == (f"Jo: {text}", text)
