"""The `request_human` tool: a real model hands the conversation to a person with it. The
tool only answers; HandoffService finds its result among the turn's stored messages and
opens the handoff (so it works the same on every replica)."""

from langchain_core.tools import BaseTool, tool

REQUEST_HUMAN = "request_human"


def request_human_tool() -> BaseTool:
    @tool(REQUEST_HUMAN)
    def request_human(reason: str) -> str:
        """Hand this conversation to a person from the support team. Call it when the user
        asks for a human, or when the knowledge base cannot answer and the user needs
        help anyway. `reason`: one short sentence for the staff member."""
        return (
            f"A person from the support team will take over ({reason}). Tell the user so "
            "in one sentence; the service adds when they will reply."
        )

    return request_human
