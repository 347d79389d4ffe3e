"""`create_agent` without the per-call work of LangChain's that this service never uses.

- LangChain wraps every middleware's `wrap_model_call` and `wrap_tool_call` in LangSmith's
  `traceable`. With LangSmith tracing off (the service traces with Langfuse) a wrapper
  records nothing, yet each call copies contexts twice and sets up and ends a run: about
  fourteen wrapped calls a turn. Agents built while LangSmith tracing is off call the hooks
  directly; with it on, LangChain builds them as usual.
- langchain-core re-reads the type hints of its data content blocks (`get_type_hints` over
  a constant union) for every content block of every message it sends; the result is
  computed once.
"""

import functools
import threading
from typing import Any

from langchain.agents import create_agent

# The builder swaps a module attribute of LangChain's for the duration of one build.
_building = threading.Lock()


def create_lean_agent(*args: Any, **kwargs: Any) -> Any:
    """`langchain.agents.create_agent(*args, **kwargs)`, lean as the module says."""
    from langchain.agents import factory
    from langsmith.utils import tracing_is_enabled

    _content_block_types_once()
    if tracing_is_enabled():
        return create_agent(*args, **kwargs)
    with _building:
        traceable = factory.traceable
        factory.traceable = _without_span
        try:
            return create_agent(*args, **kwargs)
        finally:
            factory.traceable = traceable


def _without_span(*_args: Any, **_kwargs: Any) -> Any:
    return lambda hook: hook


@functools.cache
def _content_block_types_once() -> None:
    from langchain_core.messages import content

    content._get_data_content_block_types = functools.cache(content._get_data_content_block_types)
