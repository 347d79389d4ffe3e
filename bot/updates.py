"""What a Telegram message means for the chat service: whose conversation, who wrote it,
whether the bot was asked, and the question itself."""

import re

from telegram import Message, MessageEntity
from telegram.constants import ChatType
from telegram.ext import filters

from app.settings import Audience, TelegramSettings


def conversation_key(message: Message) -> str:
    """One conversation per chat; a forum topic is a conversation of its own."""
    if message.is_topic_message and message.message_thread_id is not None:
        return f"telegram:{message.chat_id}:{message.message_thread_id}"
    return f"telegram:{message.chat_id}"


def audience(message: Message, settings: TelegramSettings) -> Audience:
    return "staff" if message.chat_id in settings.staff_chat_ids else "client"


def author_name(message: Message) -> str | None:
    """The display name the model sees; anonymous admins and channels write as a chat."""
    if message.sender_chat is not None:
        return message.sender_chat.effective_name
    return message.from_user.full_name if message.from_user else None


def _sender(message: Message) -> str | None:
    """Who wrote it, by id: the user, or the chat an anonymous admin or channel writes as."""
    if message.sender_chat is not None:
        return f"telegram:{message.sender_chat.id}"
    return f"telegram:{message.from_user.id}" if message.from_user else None


def group_person(message: Message) -> str | None:
    """Who wrote a group message (`TurnRequest.person`): a handoff there is one member's.
    None in a private chat, which is one person's anyway."""
    return None if message.chat.type == ChatType.PRIVATE else _sender(message)


def replied_person(message: Message) -> str | None:
    """Whose group message this one replies to (`TurnRequest.replying_to`): someone
    else's, not a forum topic's start (every message of a topic replies to it)."""
    replied = message.reply_to_message
    if replied is None or replied.forum_topic_created is not None:
        return None
    person = group_person(replied)
    return person if person != group_person(message) else None


def _mentions_bot(message: Message) -> bool:
    bot = message.get_bot()
    types: list[str | None] = [MessageEntity.MENTION, MessageEntity.TEXT_MENTION]
    entities = message.parse_entities(types) | message.parse_caption_entities(types)
    return any(
        (entity.user is not None and entity.user.id == bot.id)
        or text.lstrip("@").lower() == (bot.username or "").lower()
        for entity, text in entities.items()
    )


def replies_to_bot(message: Message) -> bool:
    replied = message.reply_to_message
    return (
        replied is not None
        and replied.from_user is not None
        and replied.from_user.id == message.get_bot().id
        # in a forum every message replies to the topic's first message
        and replied.forum_topic_created is None
    )


class _AddressedToBot(filters.MessageFilter):
    # Not filters.Mention: it ignores captions and compares usernames case-sensitively.
    def filter(self, message: Message) -> bool:
        return (
            message.chat.type == ChatType.PRIVATE
            or _mentions_bot(message)
            or replies_to_bot(message)
        )


ADDRESSED_TO_BOT = _AddressedToBot(name="ADDRESSED_TO_BOT")
"""Private chats, and group messages that mention the bot or reply to one of its messages."""


def question_text(message: Message) -> str:
    """The message's text or caption without the bot's @username."""
    text = message.text or message.caption or ""
    username = message.get_bot().username
    if username:
        text = re.sub(rf"@{re.escape(username)}\b", "", text, flags=re.IGNORECASE)
    return re.sub(r"[ \t]{2,}", " ", text).strip()


def command_argument(message: Message) -> str:
    """What follows a command such as `/ask`, line breaks kept."""
    parts = (message.text or "").split(maxsplit=1)
    return parts[1].strip() if len(parts) == 2 else ""
