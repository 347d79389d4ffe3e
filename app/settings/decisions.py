"""What a message is before any model reads it (`SUPPORTBOT_DECISIONS__…`)."""

from pathlib import Path

from pydantic import BaseModel, Field

from app.settings.home import SOURCE_ROOT


class DecisionSettings(BaseModel):
    """What a message is before any model reads it (app/decisions): a request for a
    person, small talk, a question; its language. Thresholds are calibrated on the example
    messages and reported on held-out ones (`supportbot eval decisions`): each default is
    read off `supportbot eval decisions --folds 10` (docs/benchmarks.md)."""

    model_config = {"frozen": True}  # hashable: one decider per settings in a process

    person_confidence: float = Field(
        0.45,
        ge=0,
        le=1,
        description="probability with which a message must read as a request for a person "
        "(the person head: a person asked for at all) to open a handoff, with the offline model",
    )
    person_confidence_before_model: float = Field(
        0.8,
        ge=0,
        le=1,
        description="the same with a real model: below it the model decides (it has the "
        "`request_human` tool), so only unambiguous requests skip it",
    )
    person_clause_confidence: float = Field(
        0.95,
        ge=0,
        le=1,
        description="probability with which one clause of a longer message must read as a "
        "request for a person to open a handoff when the whole message reads otherwise "
        '("… I\'d rather go through it with one of your people")',
    )
    person_clause_gate: float = Field(
        0.1,
        ge=0,
        le=1,
        description="probability of a person the whole message needs before its clauses are "
        "read on their own: below it a clause that reads as a request is the message's "
        'way of asking a question ("… Weiß jemand einen passenden Treiber?"); chosen held '
        "out by set on the first fifteen held-out sets (docs/benchmarks.md)",
    )
    person_clause_min_words: int = Field(
        4,
        ge=1,
        description="words a clause needs to be read on its own for a request for a person "
        '(a shorter one lacks what it refers to: "Weiß jemand" is "does anyone know"); '
        "chosen on the first ten held-out sets (docs/benchmarks.md)",
    )
    person_closing_from_chars: int = Field(
        200,
        ge=0,
        description="length from which a message's closing sentences (the last two of "
        "`person_clause_min_words` words or more, each alone and both together) are read on "
        "their own for a request for a person, whatever the whole reads as: a long problem "
        'report ending in "… can someone call me? I\'m free after 2pm." reads as the problem. '
        "0: never. Chosen on the labelled sets the person head is fitted to (docs/decisions.md)",
    )
    person_closing_confidence: float = Field(
        0.9,
        ge=0,
        le=1,
        description="probability with which one of a long message's closing sentences must "
        "read as a request for a person to open a handoff when the whole message reads "
        "otherwise; chosen on the first set of long messages and the labelled sets "
        "(docs/benchmarks.md)",
    )
    smalltalk_confidence: float = Field(
        0.8,
        ge=0,
        le=1,
        description="probability with which a message must read as small talk (a greeting or "
        "thanks that asks nothing) to get a short reply without a search (offline model)",
    )
    back_to_bot_confidence: float = Field(
        0.7,
        ge=0,
        le=1,
        description="probability with which a message must read as 'no, I just have a "
        "question' to close a handoff nobody has claimed yet and give the bot back",
    )
    noisy_copies: int = Field(
        0,
        ge=0,
        le=5,
        description="misspelled copies of each labelled example fitted with it (dropped, "
        "swapped, doubled letters, keyboard neighbours), weighing together as much as the "
        "example, so that a message with typos reads as its intent; each copy costs one more "
        "embedding of the examples when the classifier is first fitted (then kept in the "
        "cache folder). Off by default: see docs/benchmarks.md (Decisions)",
    )
    person_examples: tuple[Path, ...] = Field(
        tuple(
            SOURCE_ROOT / "app" / "decisions" / "labelled" / f"heldout{suffix}.yaml"
            for suffix in ("", *(f"_{number}" for number in range(2, 20)))
        ),
        description="labelled first messages (YAML `messages:` with `intent: question | person "
        "| smalltalk`) the person head is fitted to besides the examples: by default the "
        "nineteen sets shipped under app/decisions/labelled/, written blind by nineteen writers "
        "and each reported on held out before it joined; each was held out in turn to choose "
        "`person_confidence` (`supportbot eval decisions --by-set`). A file that is missing is "
        "skipped",
    )
    expected_languages: tuple[str, ...] = Field(
        ("en", "ru", "de"),
        description="languages the users are expected to write in (ISO 639-1): a message too "
        "short to identify gets the likeliest of these",
    )
