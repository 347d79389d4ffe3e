"""Who in Telegram is staff: by user id, never a name they chose. The staff name
SUPPORTBOT_HANDOFF__STAFF_TELEGRAM_USERS gives them; else, for someone the staff chat
admits with one of `statuses`, `telegram:<user id>`; else nobody."""

from collections.abc import Collection

from telegram import Bot, ChatMemberRestricted
from telegram.constants import ChatMemberStatus

from app.settings import HandoffSettings

ADMINS = frozenset({ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.OWNER})
MEMBERS = ADMINS | {ChatMemberStatus.MEMBER}


async def staff_name(
    settings: HandoffSettings, bot: Bot, user_id: int, statuses: Collection[str]
) -> str | None:
    """Their staff name, or None; a failed question to Telegram raises its TelegramError."""
    if name := settings.staff_telegram_users.get(user_id):
        return name
    if settings.staff_telegram_chat_id is None:
        return None
    member = await bot.get_chat_member(settings.staff_telegram_chat_id, user_id)
    status = (
        ChatMemberStatus.MEMBER
        if isinstance(member, ChatMemberRestricted) and member.is_member
        else member.status
    )
    return f"telegram:{user_id}" if status in statuses else None
