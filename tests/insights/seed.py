"""Conversations with known outcomes written straight into the database, as turns store
them: the user's question, the search's tool message (its artifact: the relevant pages),
the answer, the turn's LLM calls, a 👎."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from app.agent.tools import KNOWLEDGE_TOOL
from app.db.engine import sync_url
from app.db.models import Conversation, Feedback, Handoff, LLMCall, Message, Turn

NOW = datetime.now(UTC)
COMMENT = "There is no number format setting where the answer says."
INVOICES = {"title": "Create an invoice", "source": "en/create-invoice.md", "similarity": 0.84}


@dataclass(frozen=True)
class Seeded:
    key: str
    question: str
    outcome: str  # as stored; a 👎 makes it `rated_down`
    days_ago: float = 1.0
    pages: tuple[dict[str, object], ...] = ()
    rated_down: bool = False
    handoff_reason: str | None = None
    cost_usd: float = 0.01
    profile: str = "client"
    model: str = "gemini-3.1-pro"  # what the turn's call was billed as


def seed(db_url: str, conversations: list[Seeded]) -> None:
    engine = create_engine(sync_url(db_url))
    with Session(engine) as session:
        for item in conversations:
            at = NOW - timedelta(days=item.days_ago)
            conversation = Conversation(
                key=item.key, channel="api", audience="client", profile=item.profile
            )
            session.add(conversation)
            session.flush()
            session.add(
                Turn(
                    conversation_id=conversation.id,
                    number=1,
                    status="ok",
                    started_at=at,
                    finished_at=at,
                    outcome=item.outcome,
                )
            )
            rows: list[tuple[str, str, list[dict[str, object]] | None]] = [
                ("user", item.question, None)
            ]
            if item.outcome in ("answered", "not_found"):
                rows.append(("tool", "search results", list(item.pages)))
            rows.append(("assistant", "an answer", None))
            for seq, (role, content, artifact) in enumerate(rows, start=1):
                session.add(
                    Message(
                        conversation_id=conversation.id,
                        seq=seq,
                        turn=1,
                        role=role,
                        content=content,
                        artifact=artifact,
                        tool_name=KNOWLEDGE_TOOL if role == "tool" else None,
                        created_at=at,
                    )
                )
            session.add(
                LLMCall(
                    conversation_id=conversation.id,
                    turn=1,
                    purpose="agent",
                    model=item.model,
                    input_tokens=1000,
                    cached_tokens=600,
                    output_tokens=50,
                    cost_usd=item.cost_usd,
                    latency_ms=100,
                    created_at=at,
                )
            )
            if item.rated_down:
                session.add(
                    Feedback(
                        conversation_id=conversation.id,
                        turn=1,
                        rating="down",
                        comment=COMMENT,
                        created_at=at,
                    )
                )
            if item.handoff_reason:
                session.add(
                    Handoff(
                        conversation_id=conversation.id,
                        reason=item.handoff_reason,
                        card={},
                        opened_at=at,
                    )
                )
        session.commit()
    engine.dispose()


BANK_SYNC = [  # not in the sample documentation: one topic, two languages
    "How do I connect my bank account for automatic online banking sync?",
    "Can the bank account sync online automatically every night?",
    "Как подключить банковский счёт для автоматической синхронизации онлайн-банка?",
    "Может ли банковский счёт синхронизироваться онлайн автоматически каждую ночь?",
]
MOBILE_APP = [  # another topic
    "Is there a mobile app for iPhone or Android?",
    "Can I use the program on my Android phone?",
    "Есть ли мобильное приложение для iPhone или Android?",
    "Можно ли пользоваться программой на телефоне с Android?",
]


def known_outcomes(prefix: str = "api:acme:") -> list[Seeded]:
    """Answered; not found on two topics in two languages; handed off; rated down; one
    bank question the period before; another tenant's question on the same topic."""
    found = [
        Seeded(f"{prefix}answered", "How do I create an invoice?", "answered", pages=(INVOICES,))
    ]
    for number, question in enumerate(BANK_SYNC):
        found.append(Seeded(f"{prefix}bank-{number}", question, "not_found", days_ago=number + 1))
    for number, question in enumerate(MOBILE_APP):
        found.append(
            Seeded(
                f"{prefix}mobile-{number}",
                question,
                "not_found",
                days_ago=number + 2,
                cost_usd=0.02,
            )
        )
    found += [
        Seeded(
            f"{prefix}person",
            "I want to talk to a real person about my contract",
            "handed_off",
            handoff_reason="asked",
        ),
        Seeded(
            f"{prefix}rated",
            "How do I change the number format of my invoices?",
            "answered",
            pages=(INVOICES,),
            rated_down=True,
        ),
        Seeded(
            f"{prefix}earlier", "How do I sync my bank account online?", "not_found", days_ago=9
        ),
        Seeded("api:other:secret", "Другой клиент: как синхронизировать банк онлайн?", "not_found"),
    ]
    return found
