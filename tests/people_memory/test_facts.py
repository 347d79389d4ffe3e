"""A fact's kind decides what a newer statement replaces; an explicit "remember that …"."""

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.memory import store
from app.memory.facts import kind_of, remembered
from app.memory.scope import api_scope, read_scopes, telegram_scope, widget_scope

SCOPE = api_scope("api:acme:", "p-1")


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("Our currency is EUR", "our currency is CHF now"),
        ("We use GnuCash 4.8", "We now use GnuCash 5.4"),
        ("My operating system is Windows 10", "my operating system is Ubuntu 24.04"),
        ("I'm using GnuCash 4.8", "we use GnuCash 5.4"),
        ("I prefer short answers", "I prefer detailed answers with screenshots"),
    ],
)
def test_statements_of_one_kind(older: str, newer: str) -> None:
    assert kind_of(older) == kind_of(newer)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("Our currency is EUR", "Our company is a GmbH"),
        ("We use GnuCash 4.8", "We use Windows 11"),
        ("My operating system is Windows 10", "My country is Austria"),
        ("Our invoice printer is a Brother", "Our currency is EUR"),
        ("I prefer short answers", "I need VAT reports monthly"),
        ("I'm on Windows", "I'm on macOS"),  # no subject word: the value is the kind
    ],
)
def test_statements_of_different_kinds(one: str, other: str) -> None:
    assert kind_of(one) != kind_of(other)


def test_remember_that_is_an_explicit_command() -> None:
    assert remembered("Remember that our currency is CHF.") == "our currency is CHF"
    assert remembered("please remember: we invoice in CHF") == "we invoice in CHF"
    assert remembered("Do you remember the VAT rate?") is None
    assert remembered("How do I remember recurring invoices?") is None


def test_scopes_read_a_telegram_chat_and_never_another() -> None:
    assert read_scopes(telegram_scope(-100, 7)) == ["telegram|-100|7", "telegram|-100|*"]
    assert read_scopes(widget_scope("alice")) == ["widget|alice"]
    with pytest.raises(ValueError, match="free of"):
        api_scope("api:acme:", "a|b")  # a person id cannot reach into another scope


async def test_a_newer_statement_replaces_the_older_of_its_kind(
    pg_sessions: async_sessionmaker[AsyncSession],
) -> None:
    async with pg_sessions() as session:
        for text in ["Our currency is EUR", "Our company is a GmbH", "our currency is CHF"]:
            await store.remember(session, SCOPE, text, conversation=None, message_id=None,
                                 max_items=10)  # fmt: skip
        assert await store.remember(session, SCOPE, "Our company is a GmbH", conversation=None,
                                    message_id=None, max_items=10) is None  # fmt: skip
        current = [i.text for i in await store.active_items(session, [SCOPE])]
        assert current == ["Our company is a GmbH", "our currency is CHF"]
        await store.remember(session, SCOPE, "We use GnuCash 5", conversation=None,
                             message_id=None, max_items=2)  # fmt: skip
        assert [i.text for i in await store.active_items(session, [SCOPE])] == [
            "our currency is CHF",
            "We use GnuCash 5",
        ]


def test_the_turn_report_names_the_remembered_items_it_showed() -> None:
    from app.chat.store import BegunTurn
    from app.chat.turn import memory_report
    from app.db.models import Conversation, Turn

    begun = BegunTurn(Conversation(key="k"), Turn(number=1), {"messages": []}, {}, 0, 0, 0)
    report = memory_report(begun, None, summaries=0, remembered=(4, 9))
    assert report.tags() == ["memory:remembered"]
    assert report.metadata()["memory_people_items"] == "4,9"
    assert memory_report(begun, None, summaries=0).tags() == []
