"""The optional LLM judge reads the judge model's verdicts, and refuses a broken reply."""

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from evals.judge import judged_fact_coverage

FACTS = ["Business → Customer → Process Payment", "Transfer Account"]


def judge_replying(text: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(text)]))


def test_the_share_of_facts_the_judge_finds() -> None:
    judge = judge_replying('Sure: {"present": [true, false]}')
    assert judged_fact_coverage(judge, "How do I record it?", "Use Process Payment.", FACTS) == 0.5


def test_an_unusable_verdict_is_no_number() -> None:
    for reply in ("yes", '{"present": [true]}', '{"found": [true, true]}'):
        assert judged_fact_coverage(judge_replying(reply), "q", "a", FACTS) is None
