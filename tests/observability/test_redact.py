"""Secrets are scrubbed from provider error text and from log records."""

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from app.observability.redact import (
    REDACTED,
    RedactingFilter,
    configured_secrets,
    install_log_redaction,
    redact_secrets,
)
from app.settings import DbSettings, ExpertSettings, LLMSettings, Settings, TelegramSettings
from tests.conftest import make_client

TELEGRAM_TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Incorrect API key provided: sk-proj-Ab12Cd34Ef56Gh78Ij90Kl", "sk-proj-Ab12Cd34Ef56"),
        ("invalid x-api-key sk-ant-api03-AbCdEfGhIjKlMnOpQrSt-uvw", "sk-ant-api03-AbCdEf"),
        ("OpenRouter: key sk-or-v1-0123456789abcdef0123456789abcdef is out", "sk-or-v1-0123"),
        ("API key not valid: AIzaSyA1234567890abcdefghijklmnopqrstu", "AIzaSyA12345"),
        ("request had Bearer eyJhbGciOi.xyz-123_abc attached", "eyJhbGciOi.xyz-123_abc"),
        ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ("headers={'authorization': 'Bearer tok_live_998877'}", "tok_live_998877"),
        ('{"error": "bad", "api_key": "abc def 123", "x": 1}', "abc def 123"),
        ("x-api-key: k3y-v4lue-0001\r\nhost: api", "k3y-v4lue-0001"),
        ("api-key=azure0123456789; retry", "azure0123456789"),
        ("GET https://gen.googleapis.com/v1/models?key=plainkey42&alt=json", "plainkey42"),
        ("POST https://h.example/hook?user=1&token=t0k3nv4lu3#frag", "t0k3nv4lu3"),
        (f"telegram said: {TELEGRAM_TOKEN} is unauthorized", TELEGRAM_TOKEN),
        (f"POST https://api.telegram.org/bot{TELEGRAM_TOKEN}/sendMessage 401", TELEGRAM_TOKEN),
        ("langfuse sk-lf-1234abcd-1234-1234-1234-123456789abc", "sk-lf-1234abcd"),
        ("langfuse pk-lf-1234abcd-1234-1234-1234-123456789abc", "pk-lf-1234abcd"),
        ("tavily: tvly-dev-AbCdEf123456 unauthorized", "tvly-dev-AbCdEf"),
        ("connect postgresql://bot:hunter2pw@db:5432/supportbot failed", "hunter2pw"),
    ],
)
def test_each_secret_shape_is_scrubbed(text: str, secret: str) -> None:
    redacted = redact_secrets(text)

    assert secret not in redacted
    assert REDACTED in redacted


def test_field_names_and_the_rest_of_the_text_stay_readable() -> None:
    redacted = redact_secrets('401 {"api_key": "abc def 123", "model": "gpt-4o"}')

    assert redacted == f'401 {{"api_key": "{REDACTED}", "model": "gpt-4o"}}'
    assert redact_secrets("Authorization: Bearer abcdefgh12") == f"Authorization: Bearer {REDACTED}"


@pytest.mark.parametrize(
    "text",
    [
        "Error code: 429 - {'error': {'message': 'Rate limit reached for gpt-4o-mini', "
        "'type': 'requests', 'code': 'rate_limit_exceeded'}}",
        "Connection to https://openrouter.ai/api/v1/chat/completions?stream=true timed out at "
        "12:30:45 after 60.0 s",
        "The bearer of this message asks about task-management and sk-ills; see ticket 1234:5",
        "GnuCash 5.9 was released on 29 September 2024.",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert redact_secrets(text) == text


def test_known_secrets_are_scrubbed_verbatim_and_url_encoded() -> None:
    known = ["odd/shaped+secret", "abc"]  # "abc" is too short to scrub everywhere

    redacted = redact_secrets("key odd/shaped+secret sent as odd%2Fshaped%2Bsecret; abc", known)

    assert redacted == f"key {REDACTED} sent as {REDACTED}; abc"


def test_configured_secrets_are_collected_from_the_settings() -> None:
    settings = Settings(
        db=DbSettings(url="postgresql://bot:db-password-1@db/supportbot"),
        llm=LLMSettings(api_key=SecretStr("llm-key-value")),
        telegram=TelegramSettings(token=SecretStr(TELEGRAM_TOKEN)),
        expert=ExpertSettings(tavily_api_key=SecretStr("tavily-value")),
        admin_token=SecretStr("admin-token-value"),
        _env_file=None,
    )
    settings.widget.staff_tokens = {"alice": SecretStr("alice-token")}

    assert configured_secrets(settings) == sorted(
        [
            "db-password-1",
            "llm-key-value",
            TELEGRAM_TOKEN,
            "tavily-value",
            "admin-token-value",
            "alice-token",
        ]
    )


@pytest.fixture
def captured_log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter(["configured-llm-key"]))
    logger = logging.getLogger("tests.redact")
    logger.addHandler(handler)
    logger.propagate = False
    yield logger, stream
    logger.removeHandler(handler)
    logger.propagate = True


def test_a_secret_in_a_log_message_and_its_arguments_is_scrubbed(
    captured_log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured_log

    logger.warning("provider said %s with %r", "configured-llm-key", {"api_key": "sk-abc"})

    output = stream.getvalue()
    assert "configured-llm-key" not in output and "sk-abc" not in output
    assert output.count(REDACTED) == 2


def test_a_secret_in_an_exception_traceback_is_scrubbed(
    captured_log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured_log

    try:
        raise RuntimeError(f"POST https://api.telegram.org/bot{TELEGRAM_TOKEN}/getMe: 401")
    except RuntimeError:
        logger.exception("telegram call failed")

    output = stream.getvalue()
    assert "Traceback (most recent call last)" in output
    assert "RuntimeError: POST https://api.telegram.org/bot[REDACTED]/getMe: 401" in output
    assert TELEGRAM_TOKEN not in output


def test_installing_puts_one_filter_on_the_root_handlers() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        install_log_redaction(["first-secret"])
        install_log_redaction(["second-secret"])
        logging.getLogger("tests.redact.child").error("leaked second-secret and first-secret")
    finally:
        root.removeHandler(handler)

    assert [type(f) for f in handler.filters] == [RedactingFilter]
    assert stream.getvalue() == f"leaked {REDACTED} and first-secret\n"


def test_the_app_scrubs_its_configured_secrets_from_the_logs_once_started(
    settings: Settings, sample_index: Path
) -> None:
    settings.llm.api_key = SecretStr("configured-llm-key")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with make_client(settings, sample_index):
            logging.getLogger("tests.redact.app").error("provider echoed configured-llm-key")
    finally:
        root.removeHandler(handler)

    assert f"provider echoed {REDACTED}\n" in stream.getvalue()


def test_uvicorn_access_lines_still_format_after_redaction() -> None:
    """uvicorn's access formatter unpacks the record's arguments: they keep their shape."""
    from uvicorn.logging import AccessFormatter

    formatter = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s')
    redactor = RedactingFilter()
    for path, shown in [
        ("/healthz", "/healthz"),
        ("/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0/getMe", "[REDACTED]"),
    ]:
        record = logging.LogRecord(
            "uvicorn.access",
            logging.INFO,
            __file__,
            1,
            '%s - "%s %s HTTP/%s" %d',
            ("127.0.0.1:5000", "GET", path, "1.1", 200),
            None,
        )
        assert redactor.filter(record)
        line = formatter.format(record)
        assert shown in line and "AAHdqTcv" not in line and line.endswith('" 200 OK')
