"""The memory profiles, as data: one pydantic model per profile, defaults in one dict.

Every threshold counts tokens with `knowledge.tokens.count_tokens` over the conversation part of
the context (the stored summary plus the messages the model still sees; the static system
prompt and the tool definitions are not counted). A policy left out (`None`) is off.
"""

from pydantic import BaseModel, Field, model_validator


class ClearingPolicy(BaseModel):
    """Replace old tool results by a one-line placeholder, in batches, persisted."""

    trigger_tokens: int = Field(ge=0, description="clear only when the context exceeds this")
    keep: int = Field(ge=0, description="the most recent tool results stay in full")
    clear_at_least: int = Field(
        ge=0, description="clear only when this many tokens come free (one big step, not many)"
    )
    exclude_tools: tuple[str, ...] = Field((), description="tools whose results never clear")


class TrimPolicy(BaseModel):
    """Drop the oldest whole exchanges (a user message and the agent's work on it)."""

    high_tokens: int = Field(gt=0, description="trim when the context exceeds this mark")
    low_tokens: int = Field(gt=0, description="... down to at most this mark")

    @model_validator(mode="after")
    def _low_not_above_high(self) -> "TrimPolicy":
        if self.low_tokens > self.high_tokens:
            raise ValueError("low_tokens must not exceed high_tokens")
        return self


class SummaryPolicy(BaseModel):
    """Fold the oldest exchanges into a stored summary that sits after the system prompt."""

    trigger_tokens: int | None = Field(None, gt=0, description="fold when the context exceeds")
    trigger_exchanges: int | None = Field(
        None, gt=0, description="... or when this many exchanges are verbatim (every M turns)"
    )
    keep_exchanges: int = Field(ge=1, description="the last exchanges that stay verbatim")

    @model_validator(mode="after")
    def _has_trigger(self) -> "SummaryPolicy":
        if self.trigger_tokens is None and self.trigger_exchanges is None:
            raise ValueError("a summary needs trigger_tokens or trigger_exchanges")
        return self


class ResultPolicy(BaseModel):
    """How much of a knowledge-base search the model is shown (the tool's own
    `knowledge.result_token_budget` when left out)."""

    first_tokens: int = Field(gt=0, description="the turn's first search result")
    later_tokens: int = Field(gt=0, description="each further search result of the turn")
    reference_seen: bool = Field(
        True, description="name, not resend, passages an earlier result still shows in full"
    )


class MemoryProfile(BaseModel):
    description: str
    clearing: ClearingPolicy | None = None
    trim: TrimPolicy | None = None
    summary: SummaryPolicy | None = None
    results: ResultPolicy | None = None


# Clear every tool result but the last 3 in one step, once 4,000 tokens would come free.
BATCH_CLEARING = ClearingPolicy(trigger_tokens=6000, keep=3, clear_at_least=4000)


def default_profiles() -> dict[str, MemoryProfile]:
    """The app's profiles, one per audience; settings deep-merge overrides onto them
    (`ProfilesSettings`) and may add more. The evals' comparison profiles (`baseline`,
    `trim-naive`, LangChain's own middleware, …) live in `evals/profiles.py`."""
    return {
        "staff": MemoryProfile(
            description="short, precise staff chats: trim + clear",
            clearing=BATCH_CLEARING,
            trim=TrimPolicy(high_tokens=8000, low_tokens=4000),
        ),
        # Measured on the dev client session against 9000 / 4 and one 1000-token budget
        # for every search: −20% warm cost, more gold pages shown (evals/README.md).
        "client": MemoryProfile(
            description="long group chats with topic jumps: summary + clear",
            clearing=BATCH_CLEARING,
            summary=SummaryPolicy(trigger_tokens=8000, keep_exchanges=3),
            results=ResultPolicy(first_tokens=1200, later_tokens=200),
        ),
    }
