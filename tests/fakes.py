"""Test doubles: a chat model that records exactly what the provider would receive."""

import re
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import Field

from app.agent.offline import OfflineChatModel
from knowledge.types import Passage


@dataclass
class ModelCall:
    messages: list[BaseMessage]
    tools: list[dict[str, Any]]


class CapturingChatModel(OfflineChatModel):
    """The offline model's behaviour, plus a copy of every request it was sent."""

    calls: list[ModelCall] = Field(default_factory=list)
    fail_with: str | None = None

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls.append(ModelCall(deepcopy(messages), deepcopy(kwargs.get("tools") or [])))
        if self.fail_with:
            raise RuntimeError(self.fail_with)
        return super()._generate(messages, *args, **kwargs)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class KeywordRetriever:
    """Ranks a fixed list of passages by shared words: enough to drive the agent loop."""

    def __init__(self, passages: list[Passage]) -> None:
        self.passages = passages
        self.queries: list[str] = []

    def search(self, query: str, k: int) -> list[Passage]:
        self.queries.append(query)
        asked = _words(query)
        ranked = sorted(self.passages, key=lambda p: len(asked & _words(p.text)), reverse=True)
        return [p for p in ranked[:k] if asked & _words(p.text)]


ARTICLES = [
    Passage(
        text="To create an invoice open Sales → Invoices → New invoice. Pick the customer, "
        "add line items and press Send. Drafts are kept until you send them.",
        title="Creating an invoice",
        heading="Creating an invoice > Steps",
        source="en/create-invoice.md",
    ),
    Passage(
        text="Record a payment from the invoice page: Record payment, enter the amount and "
        "the date. A partial payment leaves the invoice open.",
        title="Recording a payment",
        heading="Recording a payment",
        source="en/record-payment.md",
    ),
    Passage(
        text="Set the VAT rates under Settings → Taxes. The default rate applies to new "
        "customers; a customer can override it.",
        title="Sales tax and VAT",
        heading="Sales tax and VAT > Rates",
        source="en/vat.md",
    ),
]
