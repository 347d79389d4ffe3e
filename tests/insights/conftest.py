"""The local Langfuse capture endpoint of the observability tests."""

from tests.observability.conftest import local_server

__all__ = ["local_server"]
