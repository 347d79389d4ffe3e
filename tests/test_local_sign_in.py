"""The local sign-in link: offered on a loopback bind with no staff credentials configured,
never otherwise; its token signs in as the staff member `local`, and each start makes a new
one. The browser side is tests/browser/test_local_sign_in.py."""

from pathlib import Path

import pytest
from pydantic import SecretStr

from app.api.local_sign_in import LOCAL_STAFF, with_local_sign_in
from app.settings import ApiKey, Settings
from tests.conftest import make_client

PORT = 8000


def token_of(link: str) -> str:
    prefix, _, token = link.partition("#sign-in=")
    assert prefix == f"http://127.0.0.1:{PORT}/widget" and token
    return token


def test_a_loopback_server_without_staff_credentials_offers_a_link(
    settings: Settings, sample_index: Path
) -> None:
    signed, link = with_local_sign_in(settings, PORT)
    assert link is not None
    token = token_of(link)
    assert settings.widget.staff_tokens == {}  # the given settings are left as they were
    with make_client(signed, sample_index) as client:
        me = client.get("/v1/widget/me", headers={"authorization": f"Bearer {token}"})
        assert me.status_code == 200 and me.json()["name"] == LOCAL_STAFF
        wrong = client.get("/v1/widget/me", headers={"authorization": "Bearer not-it"})
        assert wrong.status_code == 401


def test_every_start_makes_a_new_token(settings: Settings) -> None:
    links = {with_local_sign_in(settings, PORT)[1] for _ in range(3)}
    assert len(links) == 3


def test_an_ipv6_loopback_link_has_brackets(settings: Settings) -> None:
    settings.api.host = "::1"
    _, link = with_local_sign_in(settings, PORT)
    assert link is not None and link.startswith(f"http://[::1]:{PORT}/widget#sign-in=")


@pytest.mark.parametrize(
    ("group", "values"),
    [
        pytest.param("widget", {"staff_tokens": {"alice": SecretStr("a" * 20)}}, id="tokens"),
        pytest.param("widget", {"trusted_user_header": "X-Forwarded-User"}, id="sso-header"),
        pytest.param(
            "api",
            {"host": "0.0.0.0", "keys": {"shop": ApiKey(key=SecretStr("k" * 20))}},
            id="any-address",
        ),
    ],
)
def test_no_link_otherwise(settings: Settings, group: str, values: dict[str, object]) -> None:
    for name, value in values.items():
        setattr(getattr(settings, group), name, value)
    before = settings.widget.model_dump()
    signed, link = with_local_sign_in(settings, PORT)
    assert link is None
    assert signed.widget.model_dump() == before
