"""The handoff end to end in a Telegram group: the bot (python-telegram-bot, long polling
against the fake Bot API) in this event loop, the HTTP API (staff and client credentials)
as a second process on the same database, in a thread of its own."""

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from app.chat.service import ChatService
from app.chat.store import TurnStore
from app.db import migrate
from app.db.engine import make_async_engine, make_session_factory
from app.handoff.card import HandoffCard
from app.handoff.draft import NOTHING_FOUND, no_draft
from app.handoff.service import HandoffService, Undelivered
from app.observability.metrics import REGISTRY
from app.runtime import agent_factory
from app.settings import ApiKey, Settings, TelegramSettings
from bot.handoff import TelegramMessenger
from tests.conftest import make_client
from tests.fakes import ARTICLES, CapturingChatModel, KeywordRetriever
from tests.handoff.conftest import OFFICE_OPEN
from tests.telegram.conftest import polling_bot
from tests.telegram.fake_bot_api import TOKEN, FakeBotApi, chat, serve, user, utf16_len

GROUP = chat(-1001)
STAFF_CHAT = chat(-2002)
ANN = user(11, "Ann")
BOB = user(12, "Bob")
ALICE = user(21, "Alice", "Staff") | {"username": "alice"}
STAFF = {"authorization": "Bearer alice-staff-token"}
BOB_STAFF = {"authorization": "Bearer bob-staff-token"}
CLIENT = {"authorization": "Bearer acme-client-key-0123456789"}

Json = dict[str, Any]


@pytest.fixture
async def bot_api() -> AsyncIterator[FakeBotApi]:
    async with serve(FakeBotApi()) as api:
        yield api


@pytest.fixture
def handoff_settings(settings: Settings, bot_api: FakeBotApi) -> Settings:
    settings.telegram = TelegramSettings(
        token=TOKEN, api_base_url=f"{bot_api.url}/bot", file_base_url=f"{bot_api.url}/file/bot"
    )
    settings.handoff.staff_telegram_chat_id = STAFF_CHAT["id"]
    settings.handoff.staff_telegram_users = {ALICE["id"]: "alice"}
    settings.widget.staff_tokens = {
        "alice": SecretStr("alice-staff-token"),
        "bob": SecretStr("bob-staff-token"),
    }
    settings.api.keys = {"acme": ApiKey(key=SecretStr("acme-client-key-0123456789"))}
    return settings


@pytest.fixture
async def sessions(handoff_settings: Settings) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    migrate.upgrade(handoff_settings.db.url)
    engine = make_async_engine(handoff_settings.db)
    yield make_session_factory(engine)
    await engine.dispose()


@pytest.fixture
def model() -> CapturingChatModel:
    return CapturingChatModel()


@pytest.fixture
def service(
    handoff_settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    model: CapturingChatModel,
) -> ChatService:
    turns = TurnStore(sessions.kw["bind"])
    handoffs = HandoffService(handoff_settings, turns, now=lambda: OFFICE_OPEN)
    agents = agent_factory(handoff_settings, model, KeywordRetriever(ARTICLES))
    return ChatService(handoff_settings, turns, agents, handoffs=handoffs)


@pytest.fixture
async def api(handoff_settings: Settings, sample_index: Path) -> AsyncIterator[TestClient]:
    """Started and stopped in a thread: its start-up calls the fake Bot API (getMe)."""
    client = make_client(handoff_settings.model_copy(deep=True), sample_index)
    await asyncio.to_thread(client.__enter__)
    yield client
    await asyncio.to_thread(client.__exit__, None, None, None)


async def call(api: TestClient, method: str, path: str, **kwargs: Any) -> Any:
    """The API call in a thread: this loop keeps serving the fake Bot API meanwhile."""
    return await asyncio.to_thread(getattr(api, method), path, **kwargs)


async def stored_user_messages(service: ChatService, count: int) -> None:
    """Wait until the group's conversation holds `count` user messages."""
    for _ in range(500):
        found = await service.history(f"telegram:{GROUP['id']}")
        if found and sum(m.role == "user" for m in found[1]) >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"fewer than {count} user messages were stored")


def in_chat(bot_api: FakeBotApi, chat_: Json) -> list[str]:
    return [m["text"] for m in bot_api.delivered if m["chat_id"] == chat_["id"]]


async def test_a_group_asks_for_a_person_staff_reply_in_the_chat_and_hand_back(
    bot_api: FakeBotApi,
    handoff_settings: Settings,
    service: ChatService,
    sessions: async_sessionmaker[AsyncSession],
    model: CapturingChatModel,
    api: TestClient,
) -> None:
    async with polling_bot(handoff_settings, service, sessions):
        bot_api.push(bot_api.message(GROUP, ANN, "@SupportBot how do I create an invoice?"))
        await bot_api.wait_for_messages(1)
        constraint = "We are a GmbH in Germany and must invoice in EUR."
        bot_api.push(bot_api.message(GROUP, BOB, f"@SupportBot {constraint}"))
        await bot_api.wait_for_messages(2)
        bot_api.push(bot_api.message(GROUP, ANN, "@SupportBot can I talk to a human?"))
        await bot_api.wait_for_messages(4)  # the notice in the group, the card for staff

        assert "person from our support team" in in_chat(bot_api, GROUP)[-1]
        (card_text,) = in_chat(bot_api, STAFF_CHAT)
        assert constraint in card_text and "Reason: asked, by Ann" in card_text
        card_message = next(m for m in bot_api.bot_messages if m["chat"]["id"] == STAFF_CHAT["id"])
        (button,) = card_message["reply_markup"]["inline_keyboard"][0]
        (handoff,) = (await call(api, "get", "/v1/handoffs", headers=STAFF)).json()
        assert button["callback_data"] == f"handoff:claim:{handoff['id']}"
        assert any(constraint in c for c in handoff["card"]["constraints"])

        for refused in (
            await call(api, "get", "/v1/handoffs", headers=CLIENT),
            await call(api, "get", f"/v1/handoffs/{handoff['id']}", headers=CLIENT),
            await call(api, "post", f"/v1/handoffs/{handoff['id']}/claim", headers=CLIENT),
        ):
            assert refused.status_code == 403
            assert refused.json() == {"detail": "handoffs need staff credentials"}

        calls_before = len(model.calls)
        click = bot_api.callback_query(ALICE, card_message, button["callback_data"])
        bot_api.push(click, kind="callback_query")
        answered = await bot_api.wait_for_calls(1, "answerCallbackQuery")
        assert "is yours" in answered[0]["text"]
        late = await call(api, "post", f"/v1/handoffs/{handoff['id']}/claim", headers=BOB_STAFF)
        assert late.status_code == 409 and "claimed by alice" in late.json()["detail"]

        waiting = bot_api.message(GROUP, ANN, "@SupportBot are you there?")
        bot_api.push(waiting)
        # A reply to Ann is in her thread: held for staff too.
        bot_api.push(bot_api.message(GROUP, BOB, "we wait for the person then", reply_to=waiting))
        await stored_user_messages(service, 5)
        for text in ("Hi Ann, Alice here.", "For a GmbH, set the EUR tax rates first."):
            sent = await call(
                api, "post", f"/v1/handoffs/{handoff['id']}/messages", headers=STAFF,
                json={"text": text},
            )  # fmt: skip
            assert sent.status_code == 201 and sent.json()["role"] == "staff"
        await bot_api.wait_for_messages(6)
        assert [m["text"] for m in bot_api.replies_to(waiting)] == [
            "alice (support team):\nHi Ann, Alice here.",
            "alice (support team):\nFor a GmbH, set the EUR tax rates first.",
        ]
        assert len(model.calls) == calls_before  # the bot said nothing meanwhile

        resolved = await call(api, "post", f"/v1/handoffs/{handoff['id']}/resolve", headers=STAFF)
        assert resolved.json()["status"] == "resolved"
        await bot_api.wait_for_messages(7)  # the client hears the bot is back
        bot_api.push(bot_api.message(GROUP, ANN, "@SupportBot partial payment?"))
        await bot_api.wait_for_messages(8)

    assert "Record payment" in in_chat(bot_api, GROUP)[-1]
    found = await service.history(f"telegram:{GROUP['id']}")
    assert found is not None
    kept = [(m.role, m.author, m.content) for m in found[1] if m.role in ("user", "staff")]
    assert kept[3:] == [
        ("user", "Ann", "are you there?"),
        ("user", "Bob", "we wait for the person then"),
        ("staff", "alice", "Hi Ann, Alice here."),
        ("staff", "alice", "For a GmbH, set the EUR tax rates first."),
        ("user", "Ann", "partial payment?"),
    ]


# -- staff replies and cards when Telegram fails (bot/delivery.py's retry policy) ----------

UNDELIVERED = "supportbot_telegram_undelivered_total"


def undelivered() -> float:
    return REGISTRY.get_sample_value(UNDELIVERED) or 0.0


async def claimed_handoff(bot_api: FakeBotApi, api: TestClient) -> int:
    """A handoff the group asked for (its notice and card sent), claimed by alice."""
    bot_api.push(bot_api.message(GROUP, ANN, "@SupportBot can I talk to a human?"))
    await bot_api.wait_for_messages(2)  # the notice in the group, the card for staff
    (handoff,) = (await call(api, "get", "/v1/handoffs", headers=STAFF)).json()
    claimed = await call(api, "post", f"/v1/handoffs/{handoff['id']}/claim", headers=STAFF)
    assert claimed.status_code == 200
    return int(handoff["id"])


async def staff_reply(api: TestClient, handoff: int, text: str) -> Any:
    return await call(
        api, "post", f"/v1/handoffs/{handoff}/messages", headers=STAFF, json={"text": text}
    )


async def stored_staff_messages(service: ChatService) -> list[str]:
    found = await service.history(f"telegram:{GROUP['id']}")
    assert found is not None
    return [m.content for m in found[1] if m.role == "staff"]


@pytest.mark.parametrize(
    ("status", "retry_after"), [(502, None), (429, 1)], ids=["bad-gateway", "flood-control"]
)
async def test_a_staff_reply_is_resent_after_a_transient_failure_and_arrives_once(
    bot_api: FakeBotApi,
    handoff_settings: Settings,
    service: ChatService,
    sessions: async_sessionmaker[AsyncSession],
    api: TestClient,
    status: int,
    retry_after: int | None,
) -> None:
    async with polling_bot(handoff_settings, service, sessions):
        handoff = await claimed_handoff(bot_api, api)
        bot_api.fail_sends(1, status, retry_after=retry_after)
        sent = await staff_reply(api, handoff, "Hi Ann, Alice here.")

    assert sent.status_code == 201
    reply = "alice (support team):\nHi Ann, Alice here."
    assert [m["text"] for m in bot_api.sent()].count(reply) == 2  # refused, then taken
    assert in_chat(bot_api, GROUP).count(reply) == 1
    assert await stored_staff_messages(service) == ["Hi Ann, Alice here."]


@pytest.mark.parametrize(
    ("status", "retry_after"), [(400, None), (429, 60)], ids=["refused", "flood-control-too-long"]
)
async def test_a_staff_reply_telegram_will_not_take_now_is_stored_and_answers_502_at_once(
    bot_api: FakeBotApi,
    handoff_settings: Settings,
    service: ChatService,
    sessions: async_sessionmaker[AsyncSession],
    api: TestClient,
    status: int,
    retry_after: int | None,
) -> None:
    async with polling_bot(handoff_settings, service, sessions):
        handoff = await claimed_handoff(bot_api, api)
        calls_before = len(bot_api.sent())
        bot_api.fail_sends(1, status, retry_after=retry_after)
        sent = await staff_reply(api, handoff, "Hi Ann, Alice here.")

    assert sent.status_code == 502
    assert "Telegram did not take the message" in sent.json()["detail"]
    assert len(bot_api.sent()) == calls_before + 1  # not tried again
    assert len(in_chat(bot_api, GROUP)) == 1  # the takeover notice only
    assert await stored_staff_messages(service) == ["Hi Ann, Alice here."]


async def test_a_staff_reply_longer_than_a_message_arrives_as_several_in_order(
    bot_api: FakeBotApi,
    handoff_settings: Settings,
    service: ChatService,
    sessions: async_sessionmaker[AsyncSession],
    api: TestClient,
) -> None:
    steps = [
        f"Step {n}: open the ledger, check account {n} and its balance." for n in range(1, 200)
    ]
    long_reply = "\n".join(steps)[:6000].rstrip()
    async with polling_bot(handoff_settings, service, sessions):
        handoff = await claimed_handoff(bot_api, api)
        sent = await staff_reply(api, handoff, long_reply)

    assert sent.status_code == 201

    first, second = bot_api.delivered[-2:]
    assert first["chat_id"] == second["chat_id"] == GROUP["id"]
    heading = "alice (support team):"
    assert first["text"].startswith(f"{heading}\nStep 1: ")
    assert first["entities"] == [{"type": "bold", "offset": 0, "length": len(heading)}]
    assert "entities" not in second
    assert f"{first['text']}\n{second['text']}" == f"{heading}\n{long_reply}"
    assert len(bot_api.delivered) == 4  # the notice, the card and the two parts
    assert await stored_staff_messages(service) == [long_reply]


async def test_a_handoffs_first_send_failing_once_still_brings_notice_and_card_once(
    bot_api: FakeBotApi,
    handoff_settings: Settings,
    service: ChatService,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    bot_api.fail_sends(1, 502)  # whichever goes first, the notice or the card
    async with polling_bot(handoff_settings, service, sessions):
        bot_api.push(bot_api.message(GROUP, ANN, "@SupportBot can I talk to a human?"))
        await bot_api.wait_for_messages(2)

    (notice,) = in_chat(bot_api, GROUP)
    assert "person from our support team" in notice
    (card,) = in_chat(bot_api, STAFF_CHAT)
    assert card.startswith(f"Handoff: telegram:{GROUP['id']}")
    assert len(bot_api.sent()) == 3


async def test_a_long_card_is_posted_in_parts_claim_under_the_last_after_a_5xx(
    bot_api: FakeBotApi,
    handoff_settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    constraints = [f"Ann: account {n} must keep its EUR balance for the audit" for n in range(150)]
    card = HandoffCard(
        conversation_key=f"telegram:{GROUP['id']}",
        channel="telegram",
        reason="asked",
        requested_by="Ann",
        who=["Ann"],
        goal="close the year",
        constraints=constraints,
        exchanges=[],
        pages=[],
        open_question="",
        transcript_url="http://127.0.0.1:8000/v1/handoffs/7/transcript",
    )
    bot_api.fail_sends(1, 502)  # the first part is refused once, then resent
    async with Bot(TOKEN, base_url=f"{bot_api.url}/bot") as bot:
        draft = no_draft(NOTHING_FOUND)
        await TelegramMessenger(bot, handoff_settings, sessions).card_opened(7, card, draft)

    parts = in_chat(bot_api, STAFF_CHAT)
    assert len(parts) >= 2
    assert len(bot_api.sent()) == len(parts) + 1  # each part arrived once
    assert all(utf16_len(part) <= 4096 for part in parts)
    assert "\n".join(parts) == f"{card.as_text()}\nDraft: no draft: nothing relevant found"
    *first, last = bot_api.delivered
    assert all("reply_markup" not in message for message in first)
    (button,) = last["reply_markup"]["inline_keyboard"][0]
    assert button["callback_data"] == "handoff:claim:7"


async def test_a_card_that_cannot_be_posted_leaves_the_handoff_in_the_queue(
    bot_api: FakeBotApi, api: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    before = undelivered()
    bot_api.fail_sends(1_000_000, 429, retry_after=3600)  # the staff chat is out of reach
    turn = {"audience": "client", "author": "Ann", "text": "Can I talk to a human?"}
    asked = await call(
        api, "post", "/v1/conversations/api:shop:1/messages", json=turn, headers=CLIENT
    )

    assert asked.status_code == 200
    assert "person from our support team" in asked.json()["text"]
    (handoff,) = (await call(api, "get", "/v1/handoffs", headers=STAFF)).json()
    assert handoff["card"]["conversation_key"] == "api:shop:1" and handoff["status"] == "open"
    assert [m["chat_id"] for m in bot_api.sent()] == [STAFF_CHAT["id"]]  # given up at once
    assert bot_api.delivered == []
    (error,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert error.startswith(f"the card of handoff {handoff['id']} was not posted to staff: ")
    assert undelivered() == before + 1


async def test_a_staff_reply_the_rate_limiter_would_hold_for_minutes_gives_up_at_the_patience(
    bot_api: FakeBotApi,
    handoff_settings: Settings,
    service: ChatService,
    sessions: async_sessionmaker[AsyncSession],
    api: TestClient,
) -> None:
    """In the bot's process (and the webhook's) replies go through python-telegram-bot's
    rate limiter, which waits out a RetryAfter itself before the retry policy sees it."""
    assert service.handoffs is not None
    async with polling_bot(handoff_settings, service, sessions):
        handoff = await claimed_handoff(bot_api, api)
        bot_api.fail_sends(1, 429, retry_after=600)
        with pytest.raises(Undelivered, match="gave up after 10 s"):
            await service.handoffs.reply(handoff, "alice", "Hi Ann, Alice here.")

    assert len(in_chat(bot_api, GROUP)) == 1  # the takeover notice only
    assert await stored_staff_messages(service) == ["Hi Ann, Alice here."]


async def test_a_claim_from_telegram_is_by_user_id_never_by_name(
    bot_api: FakeBotApi,
    handoff_settings: Settings,
    service: ChatService,
    sessions: async_sessionmaker[AsyncSession],
    api: TestClient,
) -> None:
    impostor = user(66, "alice")  # named like a staff member, no username, not staff
    admin = user(31, "Carol") | {"username": "alice"}  # a staff-chat admin not listed
    bot_api.chat_members[(STAFF_CHAT["id"], admin["id"])] = "administrator"
    async with polling_bot(handoff_settings, service, sessions):
        bot_api.push(bot_api.message(GROUP, ANN, "@SupportBot can I talk to a human?"))
        await bot_api.wait_for_messages(2)  # the notice in the group, the card for staff
        card = next(m for m in bot_api.bot_messages if m["chat"]["id"] == STAFF_CHAT["id"])
        (handoff,) = (await call(api, "get", "/v1/handoffs", headers=STAFF)).json()

        refused = await bot_api.wait_for_answered_callback(bot_api.click(impostor, card, "Claim"))
        assert refused["text"] == "Only staff members claim handoffs."
        still = (await call(api, "get", f"/v1/handoffs/{handoff['id']}", headers=STAFF)).json()
        assert (still["status"], still["claimed_by"]) == ("open", None)

        taken = await bot_api.wait_for_answered_callback(bot_api.click(admin, card, "Claim"))
        assert "is yours" in taken["text"]
        claimed = (await call(api, "get", f"/v1/handoffs/{handoff['id']}", headers=STAFF)).json()
        assert (claimed["status"], claimed["claimed_by"]) == ("claimed", "telegram:31")


# -- in a group a handoff is one member's ----------------------------------------------------


async def test_in_a_group_the_member_whose_questions_found_nothing_is_handed_over_alone(
    bot_api: FakeBotApi,
    handoff_settings: Settings,
    service: ChatService,
    sessions: async_sessionmaker[AsyncSession],
    model: CapturingChatModel,
) -> None:
    """Two answers that found nothing, to different members, hand nobody over; Ann's second
    hands her over: Bob is still answered, Ann's messages and replies to her are kept for
    staff, and staff replies reply to her last message."""
    assert service.handoffs is not None
    async with polling_bot(handoff_settings, service, sessions):
        bot_api.push(bot_api.message(GROUP, ANN, "@SupportBot how do I export payroll?"))
        await bot_api.wait_for_messages(1)
        bot_api.push(bot_api.message(GROUP, BOB, "@SupportBot payroll for freelancers?"))
        await bot_api.wait_for_messages(2)
        assert await service.handoffs.queue() == []  # one answer each found nothing

        bot_api.push(bot_api.message(GROUP, ANN, "@SupportBot payroll for contractors then?"))
        await bot_api.wait_for_messages(4)  # the answer with the notice, the card for staff
        assert "person from our support team" in in_chat(bot_api, GROUP)[-1]
        (handoff,) = await service.handoffs.queue()
        assert (handoff.person, handoff.reason, handoff.requested_by) == (
            f"telegram:{ANN['id']}",
            "not_found",
            "Ann",
        )

        bot_api.push(bot_api.message(GROUP, BOB, "@SupportBot VAT rates?"))
        await bot_api.wait_for_messages(5)
        assert "Settings → Taxes" in in_chat(bot_api, GROUP)[-1]  # Bob is answered

        calls_before = len(model.calls)
        held = bot_api.message(GROUP, ANN, "@SupportBot VAT rates?")
        bot_api.push(held)
        bot_api.push(bot_api.message(GROUP, BOB, "@SupportBot Ann, see Taxes", reply_to=held))
        answered = bot_api.message(GROUP, BOB, "@SupportBot partial payment?")
        bot_api.push(answered)  # a group's updates are handled in order: Ann's went first
        await bot_api.wait_for_messages(6)
        assert bot_api.replies_to(held) == []
        assert "partial payment" in bot_api.replies_to(answered)[0]["text"]
        assert len(model.calls) == calls_before + 2  # Bob's question only (a search, an answer)

        await service.handoffs.claim(handoff.id, "alice")
        await service.handoffs.reply(handoff.id, "alice", "Hi Ann, payroll is on the roadmap.")
        assert [m["text"] for m in bot_api.replies_to(held)] == [
            "alice (support team):\nHi Ann, payroll is on the roadmap."
        ]

    found = await service.history(f"telegram:{GROUP['id']}")
    assert found is not None
    users = [(m.author, m.content) for m in found[1] if m.role == "user"]
    assert users[-3:] == [
        ("Ann", "VAT rates?"),
        ("Bob", "Ann, see Taxes"),
        ("Bob", "partial payment?"),
    ]
    assert len(bot_api.delivered) == 7


async def test_the_staff_chat_sees_the_draft_and_the_sent_draft_reaches_the_group(
    bot_api: FakeBotApi,
    handoff_settings: Settings,
    service: ChatService,
    sessions: async_sessionmaker[AsyncSession],
    api: TestClient,
) -> None:
    async with polling_bot(handoff_settings, service, sessions):
        bot_api.push(bot_api.message(GROUP, ANN, "@SupportBot how do I create an invoice?"))
        await bot_api.wait_for_messages(1)
        bot_api.push(bot_api.message(GROUP, ANN, "@SupportBot can I talk to a human?"))
        await bot_api.wait_for_messages(3)  # the notice in the group, the card once drafted

        (card_text,) = in_chat(bot_api, STAFF_CHAT)
        assert "\nDraft reply: " in card_text and "Sales → Invoices → New invoice" in card_text
        assert "Draft sources: Creating an invoice (en/create-invoice.md)" in card_text
        # The group got the answer and the notice: no draft reaches it unsent.
        assert len(in_chat(bot_api, GROUP)) == 2
        (handoff,) = (await call(api, "get", "/v1/handoffs", headers=STAFF)).json()
        path = f"/v1/handoffs/{handoff['id']}"
        assert (await call(api, "post", f"{path}/claim", headers=STAFF)).status_code == 200
        edited = f"Hi Ann, Alice here. {handoff['draft']['text']}"
        sent = await call(
            api,
            "post",
            f"{path}/messages",
            headers=STAFF,
            json={"text": edited, "from_draft": True},
        )
        assert sent.status_code == 201
        await bot_api.wait_for_messages(4)
        assert in_chat(bot_api, GROUP)[-1] == f"alice (support team):\n{edited}"
    assert await stored_staff_messages(service) == [edited]
