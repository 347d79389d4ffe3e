"""The offline chat model (`model.OfflineChatModel`): the embedded default, deterministic,
no key and no network. Its parts: `passages` (reading and quoting a passage), `replies`
(its own sentences per language); what a message is comes from app/decisions."""

from app.agent.offline.model import EXPERT_TOOL, SEARCH_TOOL, OfflineChatModel
from app.agent.offline.replies import CANNOT_SEARCH, NOT_FOUND

__all__ = ["CANNOT_SEARCH", "EXPERT_TOOL", "NOT_FOUND", "SEARCH_TOOL", "OfflineChatModel"]
