"""What a turn's memory decisions did, as the trace reports them."""

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from app.agent.memory.state import MemoryUpdate
from app.chat.store import BegunTurn
from app.chat.turn import memory_report
from app.db.models import Conversation, Turn
from app.observability.tracing import MemoryReport

SEARCH_RESULT = "Set the VAT rates under Settings → Taxes. " * 40


def _begun(note_members: dict[str, list[int]] | None = None) -> BegunTurn:
    messages: list[BaseMessage] = [
        HumanMessage("How do I set VAT?", id="1"),
        AIMessage("", tool_calls=[{"name": "search", "args": {}, "id": "c1"}], id="2"),
        ToolMessage(SEARCH_RESULT, tool_call_id="c1", id="3"),
        AIMessage("Under Settings → Taxes.", id="4"),
        HumanMessage("And invoices?", id="5"),
    ]
    return BegunTurn(
        Conversation(key="k"), Turn(number=3), {"messages": messages}, note_members or {}, 0, 5, 0
    )


def test_clearing_and_trimming_are_counted_and_break_the_prefix() -> None:
    update = MemoryUpdate(placeholders={"3": "[cleared: search → 1 passage]"}, dropped=["1", "2"])

    report = memory_report(_begun(), update, summaries=0)

    assert (report.results_cleared, report.exchanges_trimmed, report.messages_folded) == (1, 1, 0)
    assert report.tokens_freed > 300
    assert not report.prefix_kept
    assert report.tags() == ["memory:cleared", "memory:trimmed", "memory:prefix-changed"]


def test_a_fold_counts_the_stored_messages_it_took_in() -> None:
    update = MemoryUpdate(dropped=["1", "2", "note"], summary="Goal: VAT.", summary_model="m")

    report = memory_report(_begun({"note": [7, 8, 9]}), update, summaries=2)

    assert (report.messages_folded, report.exchanges_trimmed, report.summary_version) == (5, 0, 2)
    assert report.tags() == ["memory:folded", "memory:prefix-changed"]


def test_a_turn_memory_left_alone_keeps_the_prefix() -> None:
    assert memory_report(_begun(), MemoryUpdate(), summaries=1) == MemoryReport(summary_version=1)
    assert memory_report(_begun(), None, summaries=0).prefix_kept
