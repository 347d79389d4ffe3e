"""Matching the many spellings of a model name against a table keyed by bare names.

Providers and routers name one model in several ways: `google_genai:gemini-3-flash`,
`openrouter:google/gemini-3-flash-preview`, `google/gemini-3-flash-preview:nitro`,
`claude-haiku-4-5-20251001`. Tables here are keyed by the bare family name
(`gemini-3-flash`, `claude-haiku-4-5`).
"""

import re
from collections.abc import Iterable

# The offline models' names (app/agent/offline.py and its summary and expert variants):
# the agent model is priced as `offline_priced_as`, the helpers as `offline_helper_priced_as`.
OFFLINE_MODEL = "offline"
OFFLINE_SUMMARY_MODEL = "offline-summary"
OFFLINE_EXPERT_MODEL = "offline-expert"
OFFLINE_HELPER_MODELS = (OFFLINE_SUMMARY_MODEL, OFFLINE_EXPERT_MODEL)
OFFLINE_MODELS = (OFFLINE_MODEL, *OFFLINE_HELPER_MODELS)  # priced as stand-ins, never billed

# What may follow a table key in a real model id: a date, a revision, a release tag.
_VARIANT_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|\d{3}\b|preview|latest|exp)")


def bare_model_name(name: str) -> str:
    """`provider:vendor/model:variant` -> `model`, lowercase."""
    name = name.strip().lower()
    provider, sep, rest = name.partition(":")
    if sep and "/" not in provider:
        name = rest  # a `provider:` prefix (init_chat_model style)
    name = name.rsplit("/", 1)[-1]  # a router's `vendor/` path
    return name.split(":", 1)[0]  # a router's `:variant` tag


def _comparable(name: str) -> str:
    # Routers write versions with dots (`claude-haiku-4.5`), providers with dashes.
    return bare_model_name(name).replace(".", "-")


def match_model(name: str, keys: Iterable[str]) -> str | None:
    """The key naming this model: the same bare name, else the longest key that the name
    extends by a date, revision or release tag (never `gpt-5` for `gpt-5-mini`)."""
    wanted = _comparable(name)
    best: str | None = None
    for key in keys:
        candidate = _comparable(key)
        if wanted == candidate:
            return key
        extends = wanted.startswith(candidate) and _VARIANT_SUFFIX.match(wanted, len(candidate))
        if extends and (best is None or len(candidate) > len(_comparable(best))):
            best = key
    return best
