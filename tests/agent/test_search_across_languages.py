"""A real model's search in a language no page is written in, end to end: the app against
the scripted OpenAI-compatible provider on 127.0.0.1 (its first answer a 500), the sample
knowledge base (English and Russian pages), and what the provider receives back from the
search tool."""

import re
from pathlib import Path

from app.agent.tools import KNOWLEDGE_TOOL
from app.bench.scripted_llm import Fault, Reply, ScriptedLLM
from app.settings import LLMSettings, Settings
from tests.conftest import make_client

# A German question of the sample's development set: e5 alone does not find its page among
# the first three (tests/knowledge/test_crosslingual.py).
GERMAN = (
    "Ich habe einen großen Export angestoßen und einen Download-Link per Mail bekommen. "
    "Wie lange ist der gültig?"
)


def _sources(tool_result: str) -> list[str]:
    """The pages the search tool listed, in its order (passages or pages to suggest)."""
    sources = re.findall(r"\(source: ([^)]+)\)", tool_result)
    assert len(sources) >= 3, tool_result  # something was found: the order is the test
    return sources


def _searched(settings: Settings, sample_index: Path, query: str) -> tuple[str, list[str]]:
    """The search tool's result as the provider received it, and the faults it served."""
    server = ScriptedLLM(retry_after_seconds=1)
    with server:
        settings.llm = LLMSettings(
            model="scripted",
            base_url=server.base_url,
            api_key="dummy",
            retry_initial_delay_seconds=0,
        )
        server.fail_next(Fault.SERVER_ERROR)
        server.add(Reply.call(KNOWLEDGE_TOOL, query=query), Reply("Siehe die Seite."))
        with make_client(settings, sample_index) as api:
            reply = api.post(
                "/v1/conversations/api:across/messages",
                json={"audience": "client", "author": "Jo", "text": query},
            )
        assert reply.status_code == 200, reply.text
        last = server.received[-1].body["messages"]
        faults = [str(received.fault) for received in server.received if received.fault]
    tool = [m["content"] for m in last if m["role"] == "tool"]
    assert len(tool) == 1
    return tool[0], faults


def test_a_german_search_over_english_and_russian_pages_gets_the_answering_page(
    settings: Settings, sample_index: Path
) -> None:
    result, faults = _searched(settings, sample_index, GERMAN)
    assert faults == [str(Fault.SERVER_ERROR)]  # the 500 was retried, the turn went on
    assert "en/reports.md" in _sources(result)[:3], result


def test_without_the_multilingual_view_the_page_is_not_among_the_first_three(
    settings: Settings, sample_index: Path
) -> None:
    settings.knowledge.crosslingual_weight = 0.0
    result, _ = _searched(settings, sample_index, GERMAN)
    assert "en/reports.md" not in _sources(result)[:3], result
