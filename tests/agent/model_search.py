"""What a real model receives from the search tool, end to end: the app against the
scripted OpenAI-compatible provider on 127.0.0.1 (its first answer a 500), which asks the
search tool one query and then answers."""

import re
from pathlib import Path

from app.agent.tools import KNOWLEDGE_TOOL
from app.bench.scripted_llm import Fault, Reply, ScriptedLLM
from app.settings import LLMSettings, Settings
from tests.conftest import make_client


def sources(tool_result: str) -> list[str]:
    """The pages the search tool listed, in its order (passages or pages to suggest)."""
    found = re.findall(r"\(source: ([^)]+)\)", tool_result)
    assert len(found) >= 3, tool_result  # something was found: the order is the test
    return found


def searched(settings: Settings, sample_index: Path, query: str) -> tuple[str, list[str]]:
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
        server.add(Reply.call(KNOWLEDGE_TOOL, query=query), Reply("See the page."))
        with make_client(settings, sample_index) as api:
            reply = api.post(
                "/v1/conversations/api:searched/messages",
                json={"audience": "client", "author": "Jo", "text": query},
            )
        assert reply.status_code == 200, reply.text
        last = server.received[-1].body["messages"]
        faults = [str(received.fault) for received in server.received if received.fault]
    tool = [m["content"] for m in last if m["role"] == "tool"]
    assert len(tool) == 1
    return tool[0], faults
