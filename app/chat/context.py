"""The history a turn starts from, as the model sees it.

The user messages of turns that got no answer (failed, interrupted) are not shown one by
one: each run of them becomes one note, so the next turn does not answer a pile of old
questions. The note is rebuilt the same way every turn, so the context's prefix holds."""

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage

from app.agent.messages import user_content
from app.chat.transcript import to_langchain
from app.db.models import Message

UNANSWERED_NOTE = (
    "[No answer was given to these earlier messages: a fault stopped their turns. "
    "Answer them only if the next message asks for it.]"
)


@dataclass(frozen=True)
class History:
    messages: list[BaseMessage]
    # A note's message id -> the stored messages it stands for: memory that drops the
    # note drops all of them.
    note_members: dict[str, list[int]]


def unanswered_note(messages: Sequence[Message]) -> HumanMessage:
    lines = [user_content(m.author, m.content) for m in messages]
    return HumanMessage(content="\n".join([UNANSWERED_NOTE, *lines]), id=str(messages[0].id))


def working_history(stored: Sequence[Message], unanswered_turns: Collection[int]) -> History:
    """`stored`: the messages still in the context, in order; `unanswered_turns`: the
    numbers of the turns that ended without an answer."""
    messages: list[BaseMessage] = []
    members: dict[str, list[int]] = {}
    run: list[Message] = []

    def close_run() -> None:
        if run:
            note = unanswered_note(run)
            messages.append(note)
            members[str(note.id)] = [m.id for m in run]
            run.clear()

    for message in stored:
        if message.role == "user" and message.turn in unanswered_turns:
            run.append(message)
            continue
        close_run()
        messages.append(to_langchain(message))
    close_run()
    return History(messages, members)
