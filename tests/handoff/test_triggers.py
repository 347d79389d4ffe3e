"""The keyword rule (en/ru/de), the found-nothing rule and the office hours."""

from datetime import UTC, datetime, time

import pytest

from app.handoff.hours import next_shift_start
from app.handoff.notices import takeover_notice
from app.handoff.triggers import found_nothing, person_asked_in
from app.settings import HandoffSettings


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Can I talk to a human?", "en"),
        ("I want to speak to a real person", "en"),
        ("please connect me with an operator", "en"),
        ("Позовите оператора", "ru"),
        ("Можно поговорить с живым человеком?", "ru"),
        ("Einen Mitarbeiter bitte", "de"),
        ("Kann ich mit einem Menschen sprechen?", "de"),
        ("Verbinden Sie mich bitte mit einem Mitarbeiter", "de"),
    ],
)
def test_a_request_for_a_person_is_recognized_with_its_language(text: str, language: str) -> None:
    assert person_asked_in(text) == language


@pytest.mark.parametrize(
    "text",
    [
        "How do I create an invoice?",
        "How do I give staff access to reports?",
        "Wie lege ich einen Mitarbeiter als Benutzer an?",
        "Wie verknüpfe ich Rechnungen mit Mitarbeitern?",
        "Как добавить сотрудника в систему?",
    ],
)
def test_questions_about_people_in_the_product_are_not_requests(text: str) -> None:
    assert person_asked_in(text) is None


def test_found_nothing_is_what_the_answer_says_up_front() -> None:
    assert found_nothing("I could not find this in the documentation. Could you rephrase it?")
    assert found_nothing("Dazu habe ich in der Dokumentation nichts gefunden.")
    assert found_nothing("Я не нашёл этого в документации.")
    steps = "Open Reports → Aging. " * 10 + "If you cannot find the report, reset the filter."
    assert not found_nothing(steps)


BERLIN = HandoffSettings(timezone="Europe/Berlin", office_start=time(9), office_end=time(17))


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
    notice = takeover_notice("Позовите оператора", start)
    assert "следующая смена, в понедельник 09:00 (CET)" in notice
    assert "shortly" in takeover_notice("talk to a human", None)
