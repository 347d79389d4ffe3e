"""One logging set-up for the long-running commands (`supportbot serve`, `supportbot
telegram run`): every line with its time, level and logger, secrets redacted."""

import logging

from pydantic import BaseModel

from app.observability.redact import configured_secrets, install_log_redaction

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(settings: BaseModel) -> None:
    """Root logger at INFO with FORMAT. uvicorn, started with `log_config=None`, logs
    through it too (its own config would print no time)."""
    logging.basicConfig(format=FORMAT, level=logging.INFO, force=True)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per getUpdates otherwise
    install_log_redaction(configured_secrets(settings))  # bot URLs carry the bot token
