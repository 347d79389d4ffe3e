"""The office hours, and the notices in the client's language."""

from datetime import UTC, datetime, time

import pytest

from app.handoff.hours import has_office_hours, next_shift_start
from app.handoff.notices import resumed_notice, takeover_notice
from app.settings import HandoffSettings

BERLIN = HandoffSettings(
    timezone="Europe/Berlin", office_days=[0, 1, 2, 3, 4], office_start=time(9), office_end=time(17)
)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (datetime(2026, 12, 2, 10, 0, tzinfo=UTC), None),  # Wednesday 11:00 in Berlin
        (datetime(2026, 12, 2, 6, 0, tzinfo=UTC), "2026-12-02 09:00"),  # before the shift
        (datetime(2026, 12, 4, 19, 30, tzinfo=UTC), "2026-12-07 09:00"),  # Friday night
        (datetime(2026, 12, 5, 12, 0, tzinfo=UTC), "2026-12-07 09:00"),  # Saturday
    ],
)
def test_the_next_shift_starts_on_the_next_office_day(now: datetime, expected: str | None) -> None:
    start = next_shift_start(now, BERLIN)
    assert (start and f"{start:%Y-%m-%d %H:%M}") == expected


def test_the_notice_says_when_in_the_clients_language() -> None:
    start = next_shift_start(datetime(2026, 12, 4, 19, 30, tzinfo=UTC), BERLIN)
    notice = takeover_notice("ru", start, "telegram")
    assert "следующая смена, в понедельник 09:00 (CET)" in notice
    assert "shortly" in takeover_notice("en", None, "api")


@pytest.mark.parametrize("language", ["en", "de", "ru"])
def test_without_configured_office_hours_no_time_is_promised(language: str) -> None:
    assert not has_office_hours(HandoffSettings()) and has_office_hours(BERLIN)
    saturday = next_shift_start(datetime(2026, 12, 5, 12, 0, tzinfo=UTC), BERLIN)
    notice = takeover_notice(language, saturday, "api", office_hours=False)
    assert notice == takeover_notice(language, None, "api", office_hours=False)
    assert "09:00" not in notice and notice != takeover_notice(language, None, "api")


def test_a_language_without_wording_gets_the_english_notices() -> None:
    assert takeover_notice("fr", None, "api") == takeover_notice("en", None, "api")
    assert resumed_notice("es") == resumed_notice("en")
    assert resumed_notice("de") != resumed_notice("en")


@pytest.mark.parametrize("language", ["en", "de", "ru"])
def test_the_takeover_notice_names_ask_only_in_telegram(language: str) -> None:
    assert "/ask" in takeover_notice(language, None, "telegram")
    for channel in ("api", "widget"):
        other = takeover_notice(language, None, channel)
        assert "/ask" not in other and other.endswith("."), other
