"""An optional LLM judge: which of a turn's facts the answer states.

Its calls are the eval's overhead, not the profile's: they are neither recorded nor billed
in the table.
"""

import json
import re
from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

JUDGE_INSTRUCTIONS = (
    "You grade a support bot's answer against a list of facts a correct answer contains. "
    "For each numbered fact, decide whether the answer states it or something equivalent. "
    'Reply with JSON only: {"present": [true or false for each fact, in order]}.'
)
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def judged_fact_coverage(
    judge: BaseChatModel, question: str, answer: str, facts: Sequence[str]
) -> float | None:
    """The share of `facts` the judge finds in `answer`; None when its reply is unusable."""
    listed = "\n".join(f"{number}. {fact}" for number, fact in enumerate(facts, start=1))
    reply = judge.invoke(
        [
            SystemMessage(JUDGE_INSTRUCTIONS),
            HumanMessage(f"Question:\n{question}\n\nAnswer:\n{answer}\n\nFacts:\n{listed}"),
        ]
    )
    found = _JSON_OBJECT.search(reply.text)
    try:
        present = json.loads(found[0])["present"] if found else None
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    if not isinstance(present, list) or len(present) != len(facts):
        return None
    return sum(value is True for value in present) / len(facts)
