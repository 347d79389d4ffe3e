"""Fixtures shared with other test folders: the local Langfuse capture endpoint and
Debian's Chromium under Playwright."""

from tests.browser.test_widget import browser
from tests.observability.conftest import local_server

__all__ = ["browser", "local_server"]
