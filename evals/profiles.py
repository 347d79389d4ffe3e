"""The profiles the evals compare the app's own (`staff`, `client`) against, as data.

Two kinds: `MemoryProfile`s run by the app's own `MemoryMiddleware` (the strategies of the
production bot's table, a hybrid, and a negative control that forgets everything), and
peers made of LangChain's own middleware (`LangChainPeer`, run by `evals.peers`), set up
as LangChain's docs show and tuned for batching. Settings may redefine any of them.
"""

from typing import Any

from pydantic import BaseModel, Field

from app.agent.memory.profiles import (
    BATCH_CLEARING,
    ClearingPolicy,
    MemoryProfile,
    SummaryPolicy,
    TrimPolicy,
)
from app.settings import Settings


def comparison_profiles() -> dict[str, MemoryProfile]:
    return {
        "baseline": MemoryProfile(description="keep everything (the reference for evals)"),
        "clearing": MemoryProfile(
            description="clear old tool results in batches, nothing else",
            clearing=BATCH_CLEARING,
        ),
        "trim+clear": MemoryProfile(
            description="batch clearing, then drop old exchanges from a high to a low mark",
            clearing=BATCH_CLEARING,
            trim=TrimPolicy(high_tokens=9000, low_tokens=4500),
        ),
        "hybrid": MemoryProfile(
            description="masking window of the last 3 tool results, a summary every 10 turns",
            clearing=ClearingPolicy(trigger_tokens=0, keep=3, clear_at_least=3000),
            summary=SummaryPolicy(trigger_exchanges=14, keep_exchanges=4),
        ),
        "trim-naive": MemoryProfile(
            description="per-turn trimming and clearing, like the production bot",
            clearing=ClearingPolicy(trigger_tokens=0, keep=2, clear_at_least=0),
            trim=TrimPolicy(high_tokens=4000, low_tokens=4000),
        ),
        "forget-all": MemoryProfile(
            description="negative control: every turn sees its own message only",
            trim=TrimPolicy(high_tokens=1, low_tokens=1),
        ),
    }


class LangChainPeer(BaseModel):
    """LangChain v1's `SummarizationMiddleware` and `ContextEditingMiddleware` with
    `ClearToolUsesEdit`, given these keyword arguments (the summary model aside)."""

    description: str
    summarization: dict[str, Any] = Field(description="SummarizationMiddleware arguments")
    clear_tool_uses: dict[str, Any] | None = Field(
        None, description="ClearToolUsesEdit arguments; None: no context editing"
    )


def peer_profiles() -> dict[str, LangChainPeer]:
    return {
        # https://docs.langchain.com/oss/python/langchain/middleware/built-in: the
        # summarization example (trigger 4,000 tokens, keep 20 messages) and the context
        # editing example (ClearToolUsesEdit trigger 100,000, keep 3).
        "langchain-docs": LangChainPeer(
            description="LangChain's summarization and context editing as its docs show them",
            summarization={"trigger": ("tokens", 4000), "keep": ("messages", 20)},
            clear_tool_uses={"trigger": 100_000, "keep": 3},
        ),
        # Batched: fold rarely, far below the trigger, and show the summarizer all it
        # folds (its default shows it the last 4,000 tokens only, which loses the
        # constraint stated in the first turns). No ClearToolUsesEdit: recomputed on
        # every request, it moved the prefix at each new result and cost more at every
        # trigger below the fold point tried (evals/README.md).
        "langchain-tuned": LangChainPeer(
            description="LangChain's summarization tuned to batch, constraint kept",
            summarization={
                "trigger": ("tokens", 20_000),
                "keep": ("tokens", 5000),
                "trim_tokens_to_summarize": None,
            },
        ),
    }


# `<profile>-memory-off`: the profile with the memory of people across conversations
# (docs/memory.md) turned off. The negative control `forget-all` remembers no one either.
MEMORY_OFF = "-memory-off"
FORGETS_PEOPLE = frozenset({"forget-all"})


def context_profile(name: str) -> str:
    """The memory profile a run named `name` manages its context with."""
    return name.removesuffix(MEMORY_OFF)


def remembers_people(name: str) -> bool:
    """Whether a run named `name` keeps and shows what people said in earlier
    conversations."""
    return not name.endswith(MEMORY_OFF) and name not in FORGETS_PEOPLE


def with_comparison_profiles(settings: Settings) -> Settings:
    """The settings with the comparison profiles defined; the configured ones win."""
    definitions = {**comparison_profiles(), **settings.profiles.definitions}
    profiles = settings.profiles.model_copy(update={"definitions": definitions})
    return settings.model_copy(update={"profiles": profiles})


def known_profiles(settings: Settings) -> list[str]:
    return [*with_comparison_profiles(settings).profiles.definitions, *peer_profiles()]
