"""Models for the turn's fault paths: one slow enough that turns overlap, one that blocks
until the test lets it go, one that calls the recall tool twice at once."""

import threading
import time
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatResult
from pydantic import Field

from app.agent.messages import message_text
from tests.fakes import CapturingChatModel


class SlowModel(CapturingChatModel):
    """Widens the window in which concurrent turns overlap."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        time.sleep(0.02)
        return super()._generate(messages, *args, **kwargs)


class BlockingModel(CapturingChatModel):
    """Answers only once `release` is set; `called` says a request has arrived."""

    called: threading.Event = Field(default_factory=threading.Event)
    release: threading.Event = Field(default_factory=threading.Event)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.called.set()
        self.release.wait(timeout=30)
        return super()._generate(messages, *args, **kwargs)


class TwoRecallsModel(CapturingChatModel):
    """For `recall: <words>` calls recall_history twice in one step (the tools then run
    concurrently), then answers with what both returned."""

    def _reply(self, messages: list[BaseMessage], tool_names: set[str]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and "recall: " in message_text(last):
            query = message_text(last).split("recall: ", 1)[1]
            calls = [
                {"name": "recall_history", "args": {"query": query}, "id": f"recall{n}"}
                for n in (1, 2)
            ]
            return AIMessage(content="", tool_calls=calls)
        if isinstance(last, ToolMessage) and last.name == "recall_history":
            results = [m for m in messages if isinstance(m, ToolMessage)][-2:]
            return AIMessage(content="\n---\n".join(message_text(m) for m in results))
        return super()._reply(messages, tool_names)
