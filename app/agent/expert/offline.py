"""The expert's offline model: deterministic, no key, no network, drives the expert's real
tool loop. It searches the question, reads the top results, and reports the sentences of
those pages that best match the question, each with its URL (none: "not found")."""

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import ToolCall

from app.agent.expert.findings import ExpertReport, extract_facts
from app.agent.expert.tools import FETCH_PAGE, WEB_SEARCH
from app.agent.messages import message_text
from app.agent.offline import OfflineChatModel
from app.observability.model_names import OFFLINE_EXPERT_MODEL
from knowledge.fetch import Page

REPORT_TOOL = ExpertReport.__name__  # the tool create_agent's ToolStrategy offers


class ExtractiveExpertModel(OfflineChatModel):
    """The offline chat model's plumbing (tools, usage, streaming) with the expert's
    behaviour; see the module docstring. Its own name prices it as the cheap helper model
    (`offline_helper_priced_as`), not as the agent's model."""

    model_name: str = OFFLINE_EXPERT_MODEL
    pages_to_read: int = 3
    max_facts: int = 5

    def _reply(self, messages: list[BaseMessage], tool_names: set[str]) -> AIMessage:
        question = message_text(next(m for m in messages if isinstance(m, HumanMessage)))
        results = [m for m in messages if isinstance(m, ToolMessage)]
        searches = [m for m in results if m.name == WEB_SEARCH]
        reads = [m for m in results if m.name == FETCH_PAGE]
        if not searches:
            return self._calling(messages, [(WEB_SEARCH, {"query": question})])
        urls = [result["url"] for result in searches[-1].artifact or []][: self.pages_to_read]
        if not reads and urls:
            return self._calling(messages, [(FETCH_PAGE, {"url": url}) for url in urls])
        pages = [Page(**m.artifact) for m in reads if m.artifact]
        report = ExpertReport(facts=extract_facts(question, pages, self.max_facts))
        return self._calling(messages, [(REPORT_TOOL, report.model_dump())])

    @staticmethod
    def _calling(
        messages: list[BaseMessage], calls: list[tuple[str, dict[str, object]]]
    ) -> AIMessage:
        tool_calls = [
            ToolCall(name=name, args=args, id=f"expert-{len(messages)}-{index}")
            for index, (name, args) in enumerate(calls)
        ]
        return AIMessage(content="", tool_calls=tool_calls)
