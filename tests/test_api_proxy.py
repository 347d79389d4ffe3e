"""The SSO proxy's user header: believed only from SUPPORTBOT_WIDGET__TRUSTED_PROXIES, only
once, only as a valid staff name, in lower case like the stored keys."""

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr, ValidationError
from sqlalchemy import create_engine, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.api.main import create_app
from app.db import migrate, queries
from app.db.engine import make_async_engine, sync_url
from app.db.models import Conversation, Message
from app.settings import ApiKey, DbSettings, Settings, WidgetSettings

HEADER = "X-Forwarded-User"
PROXY = "10.0.0.2"
SHOP_KEY = "shop-key-0123456789abcdef"
QUESTION = {"audience": "staff", "author": "x", "text": "How do I create an invoice?"}

Connect = Callable[[str], TestClient]


def stored_keys(settings: Settings) -> list[str]:
    engine = create_engine(sync_url(settings.db.url))
    with engine.connect() as connection:
        keys = connection.execute(select(Conversation.key).order_by(Conversation.key)).scalars()
        found = list(keys)
    engine.dispose()
    return found


def another_peer(running: TestClient, address: str) -> TestClient:
    """A client of `running`'s app connecting from `address`, on its event loop (the app's
    lifespan, started by `running`, is shared)."""
    client = TestClient(running.app, client=(address, 40000))
    client.portal = running.portal
    return client


@pytest.fixture
def connect(settings: Settings, sample_index: Path) -> Iterator[Connect]:
    """Clients of one app, each from the address given."""
    settings.knowledge.qdrant_path = sample_index
    settings.widget.trusted_user_header = HEADER
    settings.widget.trusted_proxies = WidgetSettings(
        trusted_proxies=["10.0.0.0/24"]
    ).trusted_proxies
    settings.widget.staff_tokens = {"alice": SecretStr("alice-token")}
    settings.api.keys = {"shop": ApiKey(key=SecretStr(SHOP_KEY), prefix="api:shop:")}
    migrate.upgrade(settings.db.url)
    app = create_app(settings)
    with TestClient(app, client=(PROXY, 40000)) as first:
        clients = {PROXY: first}

        def client_from(address: str) -> TestClient:
            if address not in clients:
                clients[address] = another_peer(first, address)
            return clients[address]

        yield client_from


def test_the_header_from_any_other_peer_is_ignored_and_logged(
    connect: Connect, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    outsider = connect("203.0.113.9")
    as_alice = {HEADER: "alice"}
    with caplog.at_level(logging.WARNING, logger="app.api.auth"):
        assert outsider.get("/v1/widget/me", headers=as_alice).status_code == 401
        with_key = {**as_alice, "authorization": f"Bearer {SHOP_KEY}"}
        assert outsider.get("/v1/widget/me", headers=with_key).status_code == 403  # the key's
        posted = outsider.post(
            "/v1/conversations/widget:alice:1/messages", json=QUESTION, headers=with_key
        )
        assert posted.status_code == 403, posted.text
    assert stored_keys(settings) == []
    assert (
        "ignored the X-Forwarded-User header from 203.0.113.9, which is not in "
        "SUPPORTBOT_WIDGET__TRUSTED_PROXIES"
    ) in caplog.messages
    # From the proxy, the same header signs alice in.
    assert connect(PROXY).get("/v1/widget/me", headers=as_alice).json()["name"] == "alice"


def test_without_trusted_proxies_the_header_is_never_believed(
    settings: Settings, sample_index: Path
) -> None:
    settings.knowledge.qdrant_path = sample_index
    settings.widget.trusted_user_header = HEADER
    migrate.upgrade(settings.db.url)
    with TestClient(create_app(settings), client=("127.0.0.1", 40000)) as client:
        me = client.get("/v1/widget/me", headers={HEADER: "alice"})
        assert me.status_code == 401


@pytest.mark.parametrize(
    ("values", "detail"),
    [
        (["alice", "mallory"], "the X-Forwarded-User header came 2 times"),
        (["alice, mallory"], "the X-Forwarded-User header is no staff name: a staff name is"),
        (["\t."], "the X-Forwarded-User header is no staff name: a staff name is"),
        (["a" * 8000], "the X-Forwarded-User header is no staff name: a staff name has 1 to 64"),
        (
            ["é".encode() * 30],
            "the X-Forwarded-User header is no staff name: a staff name this long",
        ),
    ],
)
def test_a_duplicated_or_unusable_header_is_refused(
    connect: Connect, settings: Settings, values: list[str | bytes], detail: str
) -> None:
    headers = [(HEADER.encode(), v if isinstance(v, bytes) else v.encode()) for v in values]
    proxy = connect(PROXY)
    for response in (
        proxy.get("/v1/widget/me", headers=headers),
        proxy.post("/v1/conversations/widget:alice:1/messages", json=QUESTION, headers=headers),
    ):
        assert response.status_code == 401, response.text
        assert response.json()["detail"].startswith(detail)
    assert stored_keys(settings) == []


def test_names_are_taken_in_lower_case_like_the_keys(connect: Connect, settings: Settings) -> None:
    proxy = connect(PROXY)
    by_token = proxy.post(
        "/v1/conversations/widget:alice:1/messages",
        json=QUESTION,
        headers={"authorization": "Bearer alice-token"},
    )
    assert by_token.status_code == 200
    upper = {HEADER: "ALICE"}
    me = proxy.get("/v1/widget/me", headers=upper).json()
    assert (me["name"], me["conversation_prefix"]) == ("alice", "widget:alice:")
    listed = proxy.get("/v1/widget/conversations", headers=upper).json()["conversations"]
    assert [c["key"] for c in listed] == ["widget:alice:1"]
    refused = proxy.post("/v1/conversations/widget:ALICE:2/messages", json=QUESTION, headers=upper)
    assert refused.status_code == 403
    spaced = proxy.get("/v1/widget/me", headers={HEADER: "Bob Smith"}).json()
    assert spaced["conversation_prefix"] == "widget:bob+20smith:"
    accented = proxy.get("/v1/widget/me", headers={HEADER.encode(): "José".encode()}).json()
    assert (accented["name"], accented["conversation_prefix"]) == ("josé", "widget:jos+C3+A9:")
    assert stored_keys(settings) == ["widget:alice:1"]


def test_staff_token_names_are_taken_in_lower_case() -> None:
    token, other = "a-token-0123456789", "b-token-0123456789"
    widget = WidgetSettings.model_validate({"staff_tokens": {"Alice": token}})
    assert list(widget.staff_tokens) == ["alice"]
    with pytest.raises(ValidationError, match="named alike"):
        WidgetSettings.model_validate({"staff_tokens": {"Alice": token, "alice": other}})
    with pytest.raises(ValidationError, match="a staff name is"):
        WidgetSettings.model_validate({"staff_tokens": {"alice, bob": token}})


async def _listed(sessions: async_sessionmaker[AsyncSession]) -> list[str]:
    async with sessions() as session:
        for key in ("widget:alice:1", "widget:ALICE:1", "widget:Alice:2"):
            conversation = Conversation(
                key=key, channel="widget", audience="staff", profile="staff"
            )
            session.add(conversation)
            await session.flush()
            message = Message(
                conversation_id=conversation.id, seq=1, turn=1, role="user", content="hi"
            )
            session.add(message)
        await session.commit()
    async with sessions() as session:
        found = await queries.conversations_starting_with(session, "widget:alice:", 10)
    return [summary.key for summary in found]


async def test_a_staff_members_list_matches_the_case_of_the_key_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'case.db'}"
    migrate.upgrade(url)
    engine = make_async_engine(DbSettings(url=url))
    try:
        sessions = async_sessionmaker(engine, expire_on_commit=False)
        assert await _listed(sessions) == ["widget:alice:1"]
    finally:
        await engine.dispose()


@pytest.mark.postgres
async def test_a_staff_members_list_matches_the_case_of_the_key_on_postgresql(
    pg_sessions: async_sessionmaker[AsyncSession],
) -> None:
    assert await _listed(pg_sessions) == ["widget:alice:1"]
