"""Office hours: whether a person is at work now, and when the next shift starts."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from app.settings import HandoffSettings


def has_office_hours(hours: HandoffSettings) -> bool:
    """Office hours are announced to clients only when they are configured."""
    return bool(hours.office_days)


def next_shift_start(now: datetime, hours: HandoffSettings) -> datetime | None:
    """None while the office is staffed; else when the next shift starts, in the office's
    time zone. `now` is aware (any zone)."""
    local = now.astimezone(ZoneInfo(hours.timezone))
    if (
        local.weekday() in hours.office_days
        and hours.office_start <= local.time() < hours.office_end
    ):
        return None
    for days_ahead in range(8):
        day = (local + timedelta(days=days_ahead)).date()
        start = datetime.combine(day, hours.office_start, local.tzinfo)
        if day.weekday() in hours.office_days and start > local:
            return start
    raise ValueError("office_days names no weekday: nobody ever takes over")
