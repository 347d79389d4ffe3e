"""Scrubbing secrets out of text before it is stored or logged.

Providers echo what they were sent: an error body can quote the API key, the
Authorization header or a URL with `key=` in it. `redact_secrets` replaces the
configured secrets verbatim and anything shaped like a key, token or credential
with `[REDACTED]`; `RedactingFilter` does the same to every log record a handler
emits, its traceback included.
"""

import logging
import re
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import quote, urlsplit

from pydantic import BaseModel, SecretStr

REDACTED = "[REDACTED]"

# Shorter configured values are skipped: replacing a 3-character secret everywhere
# would shred ordinary text, and such a value is no secret worth the name.
MIN_KNOWN_LENGTH = 6

# Headers and JSON/dict fields whose value is a credential, in any case, with `:` or `=`.
_CREDENTIAL_FIELDS = (
    r"(?:proxy-)?authorization|x-api-key|x-goog-api-key|api[-_]?key|apikey|access[-_]token"
    r"|refresh[-_]token|client[-_]secret|secret[-_]key|password|passwd"
    r"|x-telegram-bot-api-secret-token"
)
_FIELD = re.compile(
    rf"""(?P<name>["']?\b(?:{_CREDENTIAL_FIELDS})\b["']?\s*[:=]\s*)
         (?P<quote>["'])?
         (?P<scheme>(?:bearer|basic|token)\s+)?
         (?P<value>(?(quote)[^"'\r\n]+|[^\s"',;&}}\]]+))""",
    re.IGNORECASE | re.VERBOSE,
)
# Query parameters that carry a credential (`?key=AIza…`, `&token=…`).
_QUERY = re.compile(
    r"(?P<name>[?&;](?:key|api[-_]?key|token|access[-_]token|auth|secret|password|sig)=)"
    r"(?P<value>[^&#\s\"'<>]+)",
    re.IGNORECASE,
)
# user:password@ in a URL (database and proxy URLs).
_USERINFO = re.compile(r"(?P<name>://[^/\s:@]+:)(?P<value>[^/\s@]+)(?=@)")
_BEARER = re.compile(r"(?P<name>\bbearer\s+)(?P<value>[A-Za-z0-9._~+/=-]{8,})", re.IGNORECASE)
# Values whose shape alone says what they are.
_SHAPES = re.compile(
    r"""\bsk-[A-Za-z0-9_-]{16,}             # OpenAI; sk-ant-, sk-or-, sk-lf- too
      | \bpk-lf-[A-Za-z0-9-]{8,}            # Langfuse public key
      | \bAIza[0-9A-Za-z_-]{30,}            # Google API keys
      | \btvly-[A-Za-z0-9_-]{8,}            # Tavily
      | \bgh[pousr]_[A-Za-z0-9]{30,}        # GitHub
      | \bhf_[A-Za-z0-9]{30,}               # Hugging Face
      | \bgsk_[A-Za-z0-9]{30,}              # Groq
      | \bAKIA[0-9A-Z]{16}\b                # AWS access key id
      | \beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+  # JWT
      | (?<![0-9])[0-9]{6,12}:[A-Za-z0-9_-]{30,}  # Telegram bot token, also in /bot<token>/
    """,
    re.VERBOSE,
)


def _keep_name(match: re.Match[str]) -> str:
    return match.group("name") + REDACTED


def _keep_name_and_scheme(match: re.Match[str]) -> str:
    return match["name"] + (match["quote"] or "") + (match["scheme"] or "") + REDACTED


def redact_secrets(text: str, known: Iterable[str] = ()) -> str:
    """`text` with the `known` secret values (verbatim and URL-encoded) and anything shaped
    like a key, token or credential replaced by `[REDACTED]`; field names stay readable."""
    for secret in sorted({s for s in known if len(s) >= MIN_KNOWN_LENGTH}, key=len, reverse=True):
        text = text.replace(secret, REDACTED).replace(quote(secret, safe=""), REDACTED)
    text = _FIELD.sub(_keep_name_and_scheme, text)
    for pattern in (_QUERY, _USERINFO, _BEARER):
        text = pattern.sub(_keep_name, text)
    return _SHAPES.sub(REDACTED, text)


def configured_secrets(settings: BaseModel) -> list[str]:
    """Every secret value in the settings: each `SecretStr` (also inside dicts and lists)
    and the password of any URL with credentials (a PostgreSQL or Qdrant URL)."""
    return sorted(set(_secrets_in(settings)))


def _secrets_in(value: object) -> Iterator[str]:
    if isinstance(value, SecretStr):
        yield value.get_secret_value()
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _secrets_in(getattr(value, name))
    elif isinstance(value, dict):
        for item in value.values():
            yield from _secrets_in(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _secrets_in(item)
    elif isinstance(value, str) and "://" in value:
        try:
            password = urlsplit(value).password
        except ValueError:
            return
        if password:
            yield password


class RedactingFilter(logging.Filter):
    """Redacts a record's message (its arguments merged in), traceback and stack text.
    On a handler it sees every record the handler emits, propagated ones included."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        super().__init__()
        self.known = tuple(known)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # malformed arguments: leave it to the handler's error path
            return True
        if redact_secrets(message, self.known) != message:
            record.msg, record.args = self._redacted(record, message)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_secrets(record.exc_text, self.known)
        if record.stack_info:
            record.stack_info = redact_secrets(record.stack_info, self.known)
        return True

    def _redacted(self, record: logging.LogRecord, message: str) -> tuple[Any, Any]:
        """Message and arguments with the secrets out, keeping the arguments' shape where
        that suffices: formatters such as uvicorn's access log unpack them."""
        if isinstance(record.args, tuple):
            args = tuple(
                redact_secrets(a, self.known) if isinstance(a, str) else a for a in record.args
            )
            msg = redact_secrets(str(record.msg), self.known)
            try:
                merged = msg % args if args else msg
            except (TypeError, ValueError):
                merged = message
            if redact_secrets(merged, self.known) == merged:
                return msg, args
        return redact_secrets(message, self.known), None


def install_log_redaction(known: Iterable[str] = ()) -> RedactingFilter:
    """Puts one `RedactingFilter` on every handler of the root logger and of any logger
    with handlers of its own (uvicorn's do not propagate). Calling it again updates the
    known secrets instead of adding a second filter; handlers added later are not covered."""
    redactor = RedactingFilter(known)
    loggers = [logging.getLogger()] + [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]
    for logger in loggers:
        for handler in logger.handlers:
            for old in [f for f in handler.filters if isinstance(f, RedactingFilter)]:
                handler.removeFilter(old)
            handler.addFilter(redactor)
    return redactor
