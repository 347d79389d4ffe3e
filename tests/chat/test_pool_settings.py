"""Pool sizes are settings, checked against the bot's concurrency at start-up."""

import logging

import pytest
from pydantic import SecretStr, ValidationError

from app.runtime import warn_if_pool_queues_chats
from app.settings import DbSettings, Settings, TelegramSettings


def test_a_pool_without_room_for_a_turn_is_refused() -> None:
    with pytest.raises(ValidationError, match="pool_size \\+ max_overflow must be at least 2"):
        DbSettings(pool_size=1, max_overflow=0)
    assert DbSettings(pool_size=5, max_overflow=0).turn_connections == 4


@pytest.mark.parametrize(("pool_size", "warned"), [(5, True), (17, False)])
def test_a_pool_smaller_than_the_bots_concurrency_is_logged(
    caplog: pytest.LogCaptureFixture, pool_size: int, warned: bool
) -> None:
    settings = Settings(
        db=DbSettings(pool_size=pool_size, max_overflow=0),
        telegram=TelegramSettings(token=SecretStr("1:x"), concurrent_chats=16),
        _env_file=None,
    )
    with caplog.at_level(logging.WARNING, logger="app.runtime"):
        warn_if_pool_queues_chats(settings)
    assert ("telegram.concurrent_chats is 16" in caplog.text) == warned
