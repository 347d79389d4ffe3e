"""Scenarios: recorded conversations with what a good answer needs.

Two YAML layouts: one conversation (`turns:`, like client_session_dev.yaml) or several
(`chats:` each with `id` and `turns`, like staff_chats_dev.yaml and
returning_customer.yaml). A chat may name a `tenant` (an API key prefix, `api:acme:`):
its users are then remembered across conversations as a backend's people are, each under
`api|<tenant>|<user>` (docs/memory.md); and `gap_days`, the time since the previous chat
(a week: past every cache TTL).

A turn has `id`, `user`, `text`, `kind` (smalltalk, constraint, question, followup,
return, probe, needs_web, handoff), `gold` pages relative to the knowledge-base folder,
`facts` a correct answer contains, optionally `refers_to` (an earlier turn's id),
`gap_minutes` (time since the previous turn, for prompt-cache expiry), `probes`: facts
users stated in earlier turns (or conversations) that a good answer to this one needs
(`19% and 7% VAT`, `invoice 412`), checked against what the model was sent
(`evals.metrics.probe_kept`), and `absent`: facts other people stated (another tenant's)
that must never reach this turn's model. A `handoff` turn asks for a person: the handoff
takes it (no model call), its card's summary call is reported per handoff and kept out
of the profile's turns and costs; it ends its chat (the bot stays quiet once a person
has the conversation).
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
HANDOFF_KIND = "handoff"


@dataclass(frozen=True)
class ScenarioTurn:
    id: str
    user: str
    text: str
    kind: str
    gold: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    refers_to: str | None = None
    gap_minutes: float | None = None
    probes: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> "ScenarioTurn":
        refers_to = raw.get("refers_to")
        gap = raw.get("gap_minutes")
        return cls(
            id=str(raw["id"]),
            user=str(raw["user"]),
            text=str(raw["text"]),
            kind=str(raw.get("kind", "question")),
            gold=tuple(raw.get("gold") or ()),
            facts=tuple(raw.get("facts") or ()),
            refers_to=None if refers_to is None else str(refers_to),
            gap_minutes=None if gap is None else float(gap),
            probes=tuple(str(fact) for fact in raw.get("probes") or ()),
            absent=tuple(str(fact) for fact in raw.get("absent") or ()),
        )


@dataclass(frozen=True)
class Chat:
    """One conversation of a scenario."""

    id: str
    turns: tuple[ScenarioTurn, ...]
    tenant: str | None = None  # an API key prefix: its users are remembered
    gap_days: float = 0.0  # since the previous chat's last turn

    def __post_init__(self) -> None:
        kinds = [turn.kind for turn in self.turns]
        if HANDOFF_KIND in kinds[:-1]:
            raise ValueError(f"chat {self.id}: a `{HANDOFF_KIND}` turn must be its chat's last")

    @property
    def answered_turns(self) -> tuple[ScenarioTurn, ...]:
        """The turns the bot answers (all but a closing request for a person)."""
        return tuple(turn for turn in self.turns if turn.kind != HANDOFF_KIND)

    def constraint_statements(self, probe: ScenarioTurn) -> list[str]:
        """What the probe's constraint turn stated (its sentences that are not questions)."""
        source = next(
            (t for t in self.turns if t.id == probe.refers_to and t.kind == "constraint"), None
        )
        if source is None:
            return []
        return [s for s in _SENTENCE.split(source.text) if s.strip() and not s.endswith("?")]


@dataclass(frozen=True)
class Scenario:
    name: str
    audience: str
    chats: tuple[Chat, ...]

    @property
    def turn_count(self) -> int:
        return sum(len(chat.turns) for chat in self.chats)

    @property
    def handoff_count(self) -> int:
        return sum(chat.turns[-1].kind == HANDOFF_KIND for chat in self.chats if chat.turns)

    @property
    def returning_chats(self) -> frozenset[str]:
        """The chats of a tenant in which a user of an earlier chat of the same tenant
        comes back: where the memory of people across conversations shows."""
        seen: set[tuple[str, str]] = set()
        returning = set()
        for chat in self.chats:
            if chat.tenant is None:
                continue
            people = {(chat.tenant, turn.user) for turn in chat.turns}
            if people & seen:
                returning.add(chat.id)
            seen |= people
        return frozenset(returning)


def load_scenario(path: Path) -> Scenario:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    name = str(data.get("name") or path.stem)
    raw_chats = [{"id": name, "turns": data["turns"]}] if "turns" in data else data["chats"]
    chats = tuple(
        Chat(
            str(chat["id"]),
            tuple(ScenarioTurn.parse(turn) for turn in chat["turns"]),
            tenant=None if chat.get("tenant") is None else str(chat["tenant"]),
            gap_days=float(chat.get("gap_days") or 0),
        )
        for chat in raw_chats
    )
    return Scenario(name=name, audience=str(data.get("audience", "client")), chats=chats)
