"""The main agent's tools."""

from dataclasses import asdict

from langchain_core.tools import BaseTool, tool

from knowledge.format import format_passages
from knowledge.types import Passage, Retriever


def knowledge_search_tool(retriever: Retriever, k: int, token_budget: int) -> BaseTool:
    @tool(response_format="content_and_artifact")
    def search_knowledge_base(query: str) -> tuple[str, list[dict[str, object]]]:
        """Search the product's help center. Use a short, specific query in the
        language of the documentation; returns numbered passages with their sources."""
        passages: list[Passage] = retriever.search(query, k)
        return format_passages(query, passages, token_budget), [asdict(p) for p in passages]

    return search_knowledge_base
