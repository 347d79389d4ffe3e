"""The planning functions on hand-built contexts: what is cleared, trimmed or folded."""

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from app.agent.memory.decisions import (
    cleared_copy,
    conversation_tokens,
    exchanges,
    plan_memory,
)
from app.agent.memory.profiles import (
    ClearingPolicy,
    MemoryProfile,
    SummaryPolicy,
    TrimPolicy,
)

RESULT = "passage text " * 100  # ~200 tokens


def exchange(n: int, tool: str = "search_knowledge_base") -> list[AnyMessage]:
    """One question, one search, one answer; ids as the database would give them."""
    call_id = f"call{n}"
    return [
        HumanMessage(f"Ann: question {n}?", id=f"{n}1"),
        AIMessage(
            "", tool_calls=[{"name": tool, "args": {"query": f"q{n}"}, "id": call_id}], id=f"{n}2"
        ),
        ToolMessage(RESULT, tool_call_id=call_id, name=tool, artifact=[{}, {}], id=f"{n}3"),
        AIMessage(f"answer {n}", id=f"{n}4"),
    ]


def conversation(turns: int) -> list[AnyMessage]:
    messages = [m for n in range(1, turns + 1) for m in exchange(n)]
    return [*messages, HumanMessage("Ann: the new question?", id="999")]


def profile(**policies: object) -> MemoryProfile:
    return MemoryProfile(description="test", **policies)


def test_exchanges_start_at_user_messages() -> None:
    groups = exchanges(conversation(2))
    assert [[m.id for m in g] for g in groups] == [
        ["11", "12", "13", "14"],
        ["21", "22", "23", "24"],
        ["999"],
    ]


def test_placeholder_keeps_what_was_asked_and_how_to_recall_it() -> None:
    clearing = ClearingPolicy(trigger_tokens=0, keep=1, clear_at_least=0)
    plan = plan_memory(conversation(2), None, profile(clearing=clearing))
    assert plan.placeholders == {
        "13": '[cleared: search_knowledge_base("q1") → 2 passages, recall id 13]'
    }
    assert not plan.fold and not plan.trim


def test_clearing_waits_for_a_batch_then_clears_all_but_the_last_keep() -> None:
    clearing = ClearingPolicy(trigger_tokens=0, keep=2, clear_at_least=500)
    # 3 results, 1 clearable (~190 tokens free): not worth breaking the cache yet
    assert plan_memory(conversation(3), None, profile(clearing=clearing)).placeholders == {}
    # 5 results, 3 clearable (~570 tokens free): all three go in one step
    plan = plan_memory(conversation(5), None, profile(clearing=clearing))
    assert sorted(plan.placeholders) == ["13", "23", "33"]


def test_clearing_waits_for_its_trigger_and_skips_excluded_and_cleared_results() -> None:
    messages = conversation(4)
    tokens = conversation_tokens(messages, None)
    waiting = ClearingPolicy(trigger_tokens=tokens, keep=1, clear_at_least=0)
    assert plan_memory(messages, None, profile(clearing=waiting)).placeholders == {}

    first_result = messages[2]
    assert isinstance(first_result, ToolMessage)
    messages[2] = cleared_copy(first_result, "[cleared: earlier]")  # id 13, already cleared
    messages[6:8] = exchange(2, tool="ask_expert")[1:3]  # ids 22, 23 come from another tool
    clearing = ClearingPolicy(
        trigger_tokens=0, keep=1, clear_at_least=0, exclude_tools=("ask_expert",)
    )
    plan = plan_memory(messages, None, profile(clearing=clearing))
    assert sorted(plan.placeholders) == ["33"]


def test_trim_drops_whole_exchanges_from_the_high_mark_to_the_low_mark() -> None:
    messages = conversation(6)
    per_exchange = conversation_tokens(exchange(1), None)
    total = conversation_tokens(messages, None)
    trim = TrimPolicy(high_tokens=total, low_tokens=total - 3 * per_exchange)
    assert plan_memory(messages, None, profile(trim=trim)).trim == []  # not past the high mark

    trim = TrimPolicy(high_tokens=total - 1, low_tokens=total - 3 * per_exchange)
    plan = plan_memory(messages, None, profile(trim=trim))
    assert [m.id for m in plan.trim] == [m.id for n in (1, 2, 3) for m in exchange(n)]
    kept = messages[len(plan.trim) :]
    assert isinstance(kept[0], HumanMessage)
    assert conversation_tokens(kept, None) <= trim.low_tokens


def test_trim_never_drops_the_current_exchange() -> None:
    messages = conversation(2)
    plan = plan_memory(messages, None, profile(trim=TrimPolicy(high_tokens=1, low_tokens=1)))
    assert [m.id for m in plan.trim] == [m.id for n in (1, 2) for m in exchange(n)]


def test_summary_folds_all_but_the_kept_exchanges_and_describes_their_results() -> None:
    summary = SummaryPolicy(trigger_exchanges=5, keep_exchanges=2)
    assert plan_memory(conversation(3), None, profile(summary=summary)).fold == []
    plan = plan_memory(conversation(4), None, profile(summary=summary))
    assert [m.id for m in plan.fold] == [m.id for n in (1, 2, 3) for m in exchange(n)]
    assert sorted(plan.placeholders) == ["13", "23", "33"]  # findable in the archive


def test_summary_tokens_count_towards_the_trigger() -> None:
    messages = conversation(3)
    tokens = conversation_tokens(messages, None)
    summary = SummaryPolicy(trigger_tokens=tokens, keep_exchanges=1)
    assert plan_memory(messages, None, profile(summary=summary)).fold == []
    assert plan_memory(messages, "a long summary " * 10, profile(summary=summary)).fold != []
