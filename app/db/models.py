"""Typed SQLAlchemy models: conversations, their messages, turns, LLM calls and summaries.

Nothing is ever deleted from a conversation: memory profiles only mark what the model
no longer sees (`context_state`), so the archive stays searchable.
"""

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    type_annotation_map: ClassVar = {dict[str, Any]: JSON, list[dict[str, Any]]: JSON}


class Conversation(Base):
    __tablename__ = "conversations"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(255), unique=True)  # "telegram:<chat_id>", ...
    channel: Mapped[str] = mapped_column(String(32))
    audience: Mapped[str] = mapped_column(String(16))
    profile: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, onupdate=utcnow
    )
    # The last turn whose stated facts a write at idle took in (app/memory/idle.py).
    idle_written_turn: Mapped[int | None] = mapped_column(Integer)

    messages: Mapped[list["Message"]] = relationship(
        back_populates="conversation", order_by="Message.seq"
    )


class Turn(Base):
    __tablename__ = "turns"
    __table_args__ = (UniqueConstraint("conversation_id", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    # running | ok | failed | interrupted (app/chat/types.py: TurnStatus)
    status: Mapped[str] = mapped_column(String(16), default="running", index=True)
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    trace_id: Mapped[str | None] = mapped_column(String(64))  # Langfuse trace, when tracing
    # What the turn came to (app/chat/outcome.py): answered | not_found | expert |
    # smalltalk | handed_off | quiet; None while running or when it failed.
    outcome: Mapped[str | None] = mapped_column(String(16))
    # Whose memory the turn read and wrote (app/memory/scope.py): the person who wrote it;
    # None when nobody is remembered. The staff's view of a conversation's people reads it.
    memory_scope: Mapped[str | None] = mapped_column(String(400))
    # The memory block the turn sent the model (app/memory/store.py), for staff to see what
    # it was told; a forgotten item's line is blanked here too.
    memory_block: Mapped[str | None] = mapped_column(Text)
    # Who wrote it in a chat several people share (a Telegram group): the handoffs and the
    # counts that open one are that person's (app/handoff). None: one person's chat, HTTP.
    person: Mapped[str | None] = mapped_column(String(255))


class Message(Base):
    __tablename__ = "messages"
    __table_args__ = (UniqueConstraint("conversation_id", "seq"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    seq: Mapped[int] = mapped_column(Integer)  # order within the conversation
    turn: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))  # user | assistant | tool | staff
    author: Mapped[str | None] = mapped_column(String(255))
    content: Mapped[str] = mapped_column(Text)
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    tool_call_id: Mapped[str | None] = mapped_column(String(128))
    tool_name: Mapped[str | None] = mapped_column(String(64))
    artifact: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    token_count: Mapped[int] = mapped_column(Integer, default=0)
    # What the model sees of this message: active | cleared (placeholder) | dropped.
    context_state: Mapped[str] = mapped_column(String(16), default="active")
    placeholder: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    conversation: Mapped[Conversation] = relationship(back_populates="messages")


class LLMCall(Base):
    __tablename__ = "llm_calls"

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    turn: Mapped[int] = mapped_column(Integer)
    purpose: Mapped[str] = mapped_column(String(16))  # agent | summary | expert
    model: Mapped[str] = mapped_column(String(128))
    input_tokens: Mapped[int] = mapped_column(Integer)  # all input, cached included
    cached_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cache_write_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer)
    cache_source: Mapped[str] = mapped_column(String(16), default="none")
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    latency_ms: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Summary(Base):
    __tablename__ = "summaries"

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    text: Mapped[str] = mapped_column(Text)
    through_seq: Mapped[int] = mapped_column(Integer)  # last message folded into it
    model: Mapped[str] = mapped_column(String(128))
    token_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ProcessedUpdate(Base):
    """A Telegram update already handled: its id is claimed once per bot, by one replica,
    and stays claimed across restarts (bot/dedupe.py)."""

    __tablename__ = "telegram_processed_updates"

    # Update ids are numbered per bot: two bots on one database share no claims.
    bot_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    update_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    processed_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, index=True
    )


class TelegramDelivery(Base):
    """Where a turn's answer goes in Telegram and whether it got there: `pending` from the
    moment the question is stored, then `sent` or `failed` (bot/delivery.py)."""

    __tablename__ = "telegram_deliveries"

    turn_id: Mapped[int] = mapped_column(
        ForeignKey("turns.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    chat_id: Mapped[int] = mapped_column(BigInteger)
    message_thread_id: Mapped[int | None] = mapped_column(BigInteger)
    reply_to_message_id: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    parts_sent: Mapped[int] = mapped_column(Integer, default=0)  # a resend skips these
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, onupdate=utcnow
    )


class TelegramChatMessage(Base):
    """A group message not addressed to the bot, kept (telegram.group_context `all`) until
    the next answered turn of its conversation takes it in as context (bot/group_context.py)."""

    __tablename__ = "telegram_chat_messages"

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_key: Mapped[str] = mapped_column(String(255), index=True)
    author: Mapped[str | None] = mapped_column(String(255))
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Feedback(Base):
    """A rating of one answer (one turn), e.g. from the staff widget's thumbs."""

    __tablename__ = "feedback"

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    turn: Mapped[int] = mapped_column(Integer)
    rating: Mapped[str] = mapped_column(String(8))  # up | down
    comment: Mapped[str | None] = mapped_column(Text)
    author: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # When Langfuse acknowledged the `user_feedback` score (`supportbot langfuse backfill`
    # re-sends those it never did).
    score_confirmed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Handoff(Base):
    """A conversation handed to a person: `open` until a staff member claims it (one
    conditional UPDATE: the first claim wins), `claimed` while they reply, then
    `resolved` and the bot answers again (app/handoff). One not resolved per person of a
    conversation: in a shared chat (a Telegram group) a handoff is one member's (`person`,
    as `turns.person` names them); "" is the whole conversation's (a direct chat, HTTP)."""

    __tablename__ = "handoffs"
    __table_args__ = (
        Index(
            "uq_handoffs_active_person",
            "conversation_id",
            "person",
            unique=True,
            sqlite_where=text("status != 'resolved'"),
            postgresql_where=text("status != 'resolved'"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    # Not NULL, so that the unique index keeps one whole-conversation handoff too.
    person: Mapped[str] = mapped_column(String(255), default="", server_default="")
    status: Mapped[str] = mapped_column(String(16), default="open", index=True)
    reason: Mapped[str] = mapped_column(String(32))  # asked | model | not_found | thumbs_down
    requested_by: Mapped[str | None] = mapped_column(String(255))
    card: Mapped[dict[str, Any]] = mapped_column(JSON)  # app/handoff/card.py: HandoffCard
    # The bot's drafted reply (app/handoff/draft.py: Draft); NULL while it is being drafted.
    draft: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    opened_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    claimed_by: Mapped[str | None] = mapped_column(String(255))
    claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    resolved_by: Mapped[str | None] = mapped_column(String(255))
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class MemoryItem(Base):
    """A fact or preference a person stated, kept beyond its conversation (app/memory).

    `scope` is whose it is, tenant first: `api|<key prefix>|<person>`, `widget|<staff>`,
    `telegram|<chat>|<user>` or a Telegram chat's shared facts `telegram|<chat>|*`; an item
    is only ever read by its own scope. A newer statement of the same `kind` supersedes it."""

    __tablename__ = "memory_items"

    id: Mapped[int] = mapped_column(primary_key=True)
    scope: Mapped[str] = mapped_column(String(400), index=True)
    kind: Mapped[str] = mapped_column(String(128))  # the fact's subject words
    text: Mapped[str] = mapped_column(Text)
    source_conversation: Mapped[str | None] = mapped_column(String(255))
    source_message_id: Mapped[int | None] = mapped_column(Integer)  # the recall id
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_used_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    superseded_by: Mapped[int | None] = mapped_column(
        ForeignKey("memory_items.id", ondelete="SET NULL")
    )
    superseded_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ConversationToken(Base):
    """Who started a conversation over an open API reached through a proxy: the SHA-256 of
    the token its first reply gave (app/api/conversation_tokens.py). Keyed by the
    conversation's key, claimed before its first turn creates the conversation."""

    __tablename__ = "conversation_tokens"

    conversation_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    token_sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Answer(Base):
    """An answer the support team wrote (app/answers): indexed, while enabled, into its
    knowledge-base collection as the document `answers/<id>` (knowledge/team_answers.py),
    so the bot finds it for the question, its other wordings and their translations."""

    __tablename__ = "answers"

    id: Mapped[int] = mapped_column(primary_key=True)
    question: Mapped[str] = mapped_column(Text)
    variants: Mapped[list[str]] = mapped_column(JSON, default=list)  # other wordings
    answer: Mapped[str] = mapped_column(Text)  # Markdown
    author: Mapped[str | None] = mapped_column(String(255))
    # ISO 639-1 codes of the answer's text, the first its passage's language; detected when
    # none is given.
    languages: Mapped[list[str]] = mapped_column(JSON, default=list)
    enabled: Mapped[bool] = mapped_column(default=True)
    collection: Mapped[str] = mapped_column(String(255), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, onupdate=utcnow
    )


class KnowledgeSourceRun(Base):
    """The scheduled syncs of one documentation source (`knowledge.sources`), shared by
    the replicas: the lease names the one that runs it now (taken by one conditional
    UPDATE, so no two do), the rest is what its last sync did (app/knowledge_sources)."""

    __tablename__ = "knowledge_source_runs"

    # SHA-256 of the collection and the location: a URL may be longer than a key should be.
    source_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    collection: Mapped[str] = mapped_column(String(64))
    location: Mapped[str] = mapped_column(Text)
    lease_holder: Mapped[str | None] = mapped_column(String(255))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Set when a sync ends, failed or not (the next is due `every_hours` later); a sync
    # stopped by a shutdown leaves it, so the next replica takes the source up at once.
    last_finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The documents of the last sync that went through, +added ~changed -removed
    # =unchanged (a site that could not be listed changes none of them); None: none yet.
    added: Mapped[int | None] = mapped_column(Integer)
    changed: Mapped[int | None] = mapped_column(Integer)
    removed: Mapped[int | None] = mapped_column(Integer)
    unchanged: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
