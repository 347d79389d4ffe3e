"""The usage collector is sent model calls only, and runs in the caller's thread: a turn's
many chain events cost it nothing, and no event is handed to a thread pool."""

import asyncio
import threading
from typing import Any
from uuid import UUID

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import LLMResult
from langchain_core.runnables import RunnableLambda

from app.observability.calls import UsageCollector
from app.settings import ObservabilitySettings


class _WatchedCollector(UsageCollector):
    """The collector, noting the chain events it is sent and the thread of each call's end."""

    def __init__(self) -> None:
        super().__init__("client", ObservabilitySettings())
        self.chain_events = 0
        self.end_threads: list[int] = []

    def on_chain_start(self, *args: Any, **kwargs: Any) -> None:
        self.chain_events += 1

    def on_chain_end(self, *args: Any, **kwargs: Any) -> None:
        self.chain_events += 1

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        self.end_threads.append(threading.get_ident())
        super().on_llm_end(response, run_id=run_id, **kwargs)


def test_the_collector_gets_model_calls_inline_and_no_chain_events() -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage("one"), AIMessage("two")]))

    async def two_calls(question: str) -> str:
        first = await model.ainvoke([HumanMessage(question)])
        second = await model.ainvoke([HumanMessage(str(first.content))])
        return str(second.content)

    # Three chain levels around the model calls, as the agent's graph has many.
    chain = RunnableLambda(lambda text: text) | RunnableLambda(two_calls) | RunnableLambda(str)
    collector = _WatchedCollector()

    async def turn() -> tuple[str, int]:
        answer = await chain.ainvoke("hello", {"callbacks": [collector]})
        return answer, threading.get_ident()

    answer, loop_thread = asyncio.run(turn())
    assert answer == "two"
    assert len(collector.records) == 2  # one record per model call
    assert collector.chain_events == 0
    assert collector.end_threads == [loop_thread, loop_thread]
