"""The search tool tells the model to query in the documentation's language."""

from app.agent.tools import knowledge_search_tool
from knowledge.types import Passage


class _Recorder:
    def __init__(self) -> None:
        self.queries: list[str] = []

    def search(self, query: str, k: int) -> list[Passage]:
        self.queries.append(query)
        return [Passage(text="Use Business → Customer.", title="Customers", heading="", source="c")]


def test_the_description_names_the_documentation_language() -> None:
    english = knowledge_search_tool(_Recorder(), 4, 500)
    german = knowledge_search_tool(_Recorder(), 4, 500, language="de")
    assert "written in English. Write the query in English" in english.description
    assert "written in German. Write the query in German" in german.description
    assert "Answer in the user's language" in german.description


def test_the_tool_searches_the_query_as_given() -> None:
    retriever = _Recorder()
    result = knowledge_search_tool(retriever, 4, 500).invoke(
        {
            "type": "tool_call",
            "id": "1",
            "name": "search_knowledge_base",
            "args": {"query": "create a customer"},
        }
    )
    assert retriever.queries == ["create a customer"]
    assert "Customers" in result.content


def test_the_offline_model_searches_a_followup_with_the_previous_topic() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from app.agent.offline import OfflineChatModel

    model = OfflineChatModel().bind_tools([knowledge_search_tool(_Recorder(), 4, 500)])
    first = "Client paid invoice 412 by bank transfer. How do I record the payment?"
    standalone = model.invoke([HumanMessage(first)])
    assert isinstance(standalone, AIMessage)
    assert standalone.tool_calls[0]["args"]["query"] == first
    followup = model.invoke(
        [HumanMessage(first), AIMessage("Use Process Payment."), HumanMessage("what if only half?")]
    )
    assert isinstance(followup, AIMessage)
    query = followup.tool_calls[0]["args"]["query"]
    assert query.startswith("client paid invoice 412 bank transfer record payment")
    assert query.endswith("what if only half?")
